/*
 * sql/keys.cpp: hilo_uuid, hilo_uuid_id and hilo_uuid_time: time-ordered
 * UUIDs (RFC 9562 version 7 layout) whose 74 "random" bits carry an
 * 11-bit counter and a hilo ID. The bit layout is src/core/keys.hpp's.
 *
 * hilo_uuid draws its ID with hilo_nextval, so it is unique among the
 * UUIDs of its sequence whatever the clock does; the session's clock
 * (below) only orders them.
 */
#include "../alloc/alloc.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
}

#include "../../core/keys_c_api.h"

extern "C" Datum hilo_nextval(PG_FUNCTION_ARGS);

/* Milliseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01. */
#define HILO_UNIX_MS_AT_PG_EPOCH \
    ((int64)(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)

/* This session's last UUID: the next one lies above it. */
static HiloUuidClock session_clock = {false, 0, 0, 0};

HILO_SQL_FUNCTION(hilo_uuid)
{
    static const char *const arg_names[] = {"seq"};
    if (unlikely(PG_ARGISNULL(0) || XactReadOnly || RecoveryInProgress()))
        hilo_entry(fcinfo, "hilo_uuid()", arg_names, 1, HILO_WRITES);
    int64 id = DatumGetInt64(DirectFunctionCall1(hilo_nextval, PG_GETARG_DATUM(0)));
    int64 now_ms =
        GetCurrentTimestamp() / 1000 + HILO_UNIX_MS_AT_PG_EPOCH + (int64)hilo_uuid_clock_shift_ms;
    pg_uuid_t *uuid = (pg_uuid_t *)palloc(sizeof(pg_uuid_t));
    hilo_uuid_next(&session_clock, now_ms, id, uuid->data);
    PG_RETURN_UUID_P(uuid);
}

/* The time (ms since 1970) and ID of a UUID in hilo_uuid's layout. */
static void decode(FunctionCallInfo fcinfo, const char *function_name, int64 *ms, int64 *id)
{
    pg_uuid_t *uuid = PG_GETARG_UUID_P(0);
    if (!hilo_uuid_decode(uuid->data, ms, id)) {
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("%s: %s is not a version 7 UUID", function_name,
                               DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(uuid)))),
                        errhint("It takes UUIDs made by hilo_uuid().")));
    }
}

HILO_SQL_FUNCTION(hilo_uuid_id)
{
    int64 ms, id;
    decode(fcinfo, "hilo_uuid_id()", &ms, &id);
    PG_RETURN_INT64(id);
}

HILO_SQL_FUNCTION(hilo_uuid_time)
{
    int64 ms, id;
    decode(fcinfo, "hilo_uuid_time()", &ms, &id);
    PG_RETURN_TIMESTAMPTZ((ms - HILO_UNIX_MS_AT_PG_EPOCH) * 1000);
}
