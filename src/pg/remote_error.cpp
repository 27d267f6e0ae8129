/*
 * remote_error.cpp: errors carried between processes and nodes by their
 * SQLSTATE, message, detail and hint (remote_error.h).
 */
#include "hilo.h"

#include "remote_error.h"

static void copy_text(char *to, const char *from)
{
    strlcpy(to, from != NULL ? from : "", HILO_REMOTE_TEXT_BYTES);
}

void hilo_remote_error_set(HiloRemoteError *e, int sqlerrcode, const char *message,
                           const char *detail, const char *hint)
{
    e->sqlerrcode = sqlerrcode;
    copy_text(e->message, message);
    copy_text(e->detail, detail);
    copy_text(e->hint, hint);
}

void hilo_remote_error_from_edata(HiloRemoteError *e, const ErrorData *edata)
{
    hilo_remote_error_set(e, edata->sqlerrcode, edata->message, edata->detail, edata->hint);
}

void hilo_remote_error_from_fields(HiloRemoteError *e, const char *sqlstate, const char *message,
                                   const char *detail, const char *hint)
{
    int code = ERRCODE_INTERNAL_ERROR;
    if (sqlstate != NULL && strlen(sqlstate) == 5)
        code = MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4]);
    hilo_remote_error_set(e, code, message, detail, hint);
}

bool hilo_remote_error_equal(const HiloRemoteError *a, const HiloRemoteError *b)
{
    return a->sqlerrcode == b->sqlerrcode && strcmp(a->message, b->message) == 0 &&
           strcmp(a->detail, b->detail) == 0 && strcmp(a->hint, b->hint) == 0;
}

void hilo_remote_error_sqlstate(const HiloRemoteError *e, char out[6])
{
    strlcpy(out, unpack_sql_state(e->sqlerrcode), 6);
}

void hilo_raise_remote(int sqlerrcode, const char *message, const char *detail, const char *hint)
{
    ereport(ERROR, (errcode(sqlerrcode), errmsg_internal("%s", message),
                    detail != NULL && detail[0] ? errdetail_internal("%s", detail) : 0,
                    hint != NULL && hint[0] ? errhint("%s", hint) : 0));
    pg_unreachable();
}

void hilo_rethrow_remote(const HiloRemoteError *e)
{
    hilo_raise_remote(e->sqlerrcode, e->message, e->detail, e->hint);
}
