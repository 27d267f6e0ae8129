/*
 * entry.h: the preamble every SQL function of hilo runs first.
 *
 * One call, hilo_entry(), in this order: hilo was preloaded (55000; without
 * shared_preload_libraries there is no shared state), none of the arguments
 * that must not be NULL is (22004, naming it), and for a function that
 * writes, the transaction may write (25006 in a read-only transaction or
 * during recovery). A function whose own argument checks must come before
 * the writability check calls the parts one by one. Included by
 * alloc/alloc.h.
 */
#ifndef HILO_PG_ENTRY_H
#define HILO_PG_ENTRY_H

#include "hilo.h"

/* For hilo_entry's `writes`. */
#define HILO_READS false
#define HILO_WRITES true

/* Preload, then no NULL among the first `nargs` arguments (named by
 * `arg_names`), then, if `writes`, a writable transaction. */
extern void hilo_entry(FunctionCallInfo fcinfo, const char *function_name,
                       const char *const *arg_names, int nargs, bool writes);

/* hilo_entry for a function whose first argument is a sequence name,
 * `seq` (the only one that must not be NULL), then that name checked
 * (hilo_check_name) into `name_out` (HILO_MAX_NAME_BYTES + 1 bytes). */
extern void hilo_entry_seq(FunctionCallInfo fcinfo, const char *function_name, bool writes,
                           char *name_out);

/* Raises 55000 unless hilo was loaded by shared_preload_libraries. */
extern void hilo_require_preload(const char *function_name);
/* Raises 22004 if any of the first `nargs` arguments is NULL. */
extern void hilo_require_args(FunctionCallInfo fcinfo, const char *function_name,
                              const char *const *arg_names, int nargs);
/* Raises 25006 in a read-only transaction or during recovery. */
extern void hilo_require_writable(const char *function_name);

/* The items of array argument `argno`; 22004 naming `name` if one is NULL. */
extern Datum *hilo_array_arg(FunctionCallInfo fcinfo, int argno, const char *name, int *count);

/* Adds a row to the result of a set-returning function that called
 * InitMaterializedSRF. */
extern void hilo_put_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls);

#endif /* HILO_PG_ENTRY_H */
