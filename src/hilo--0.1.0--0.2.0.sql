-- hilo 0.1.0 -> 0.2.0.
--
-- 0.1.0 is the first released catalog; its install script is frozen. A
-- fresh CREATE EXTENSION hilo runs hilo--0.1.0.sql and then this script, so
-- this is the one place where 0.2.0 differs from 0.1.0. The shared library
-- serves both: every C function accepts the argument lists of both versions.
\echo Use "ALTER EXTENSION hilo UPDATE TO '0.2.0'" to load this file. \quit
