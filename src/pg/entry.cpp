/*
 * entry.cpp: the preamble of every SQL function (entry.h), the reading of
 * its array arguments, and the error a C++ exception becomes when it
 * reaches one (guard.h).
 */
#include "entry.h"

extern "C" {
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
#include "tcop/utility.h"
}

void hilo_entry(FunctionCallInfo fcinfo, const char *function_name, const char *const *arg_names,
                int nargs, bool writes)
{
    hilo_require_preload(function_name);
    hilo_require_args(fcinfo, function_name, arg_names, nargs);
    if (writes)
        hilo_require_writable(function_name);
}

void hilo_entry_seq(FunctionCallInfo fcinfo, const char *function_name, bool writes, char *name_out)
{
    static const char *const arg_names[] = {"seq"};
    hilo_entry(fcinfo, function_name, arg_names, 1, writes);
    hilo_check_name(PG_GETARG_TEXT_PP(0), name_out);
}

/* Every entry point calls this first: without preload there is no shared state. */
void hilo_require_preload(const char *function_name)
{
    if (!hilo_preloaded)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("%s requires hilo to be loaded via shared_preload_libraries",
                               function_name),
                        errhint("Add 'hilo' to shared_preload_libraries in postgresql.conf "
                                "and restart the server.")));
}

void hilo_require_args(FunctionCallInfo fcinfo, const char *function_name,
                       const char *const *arg_names, int nargs)
{
    for (int i = 0; i < nargs; i++)
        if (PG_ARGISNULL(i))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("argument \"%s\" of %s must not be NULL", arg_names[i],
                                   function_name)));
}

void hilo_require_writable(const char *function_name)
{
    PreventCommandIfReadOnly(function_name);
    PreventCommandDuringRecovery(function_name);
}

void hilo_raise_cpp_exception(const char *function_name, const char *what)
{
    ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                    errmsg("unexpected C++ exception in %s: %s", function_name, what)));
}

Datum *hilo_array_arg(FunctionCallInfo fcinfo, int argno, const char *name, int *count)
{
    ArrayType *array = PG_GETARG_ARRAYTYPE_P(argno);
    Oid element = ARR_ELEMTYPE(array);
    int16 typlen;
    bool typbyval;
    char typalign;
    get_typlenbyvalalign(element, &typlen, &typbyval, &typalign);
    Datum *items;
    bool *nulls;
    deconstruct_array(array, element, typlen, typbyval, typalign, &items, &nulls, count);
    for (int i = 0; i < *count; i++)
        if (nulls[i])
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("array \"%s\" must not contain NULLs", name)));
    return items;
}

void hilo_put_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
    ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}
