-- hilo 0.4.0 -> 0.5.0
--
-- Faults and lifecycles: what this version changes in the catalog is listed
-- section by section below, each with the reason.

\echo Use "ALTER EXTENSION hilo UPDATE TO '0.5.0'" to load this file. \quit
