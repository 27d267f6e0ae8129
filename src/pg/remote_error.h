/*
 * remote_error.h: an error raised in one process or on one node and raised
 * again where the call was made: the allocator's mailbox, the lease
 * worker's slots and a holder's answer to a forwarded call all carry it.
 * It keeps what ereport() gave (SQLSTATE, message, detail, hint), so that
 * the caller gets the error the other side raised, never text to match.
 * Fixed size: it lives in shared memory as well as in a backend.
 */
#ifndef HILO_PG_REMOTE_ERROR_H
#define HILO_PG_REMOTE_ERROR_H

#define HILO_REMOTE_TEXT_BYTES 256

typedef struct HiloRemoteError {
    int sqlerrcode; /* 0: none */
    char message[HILO_REMOTE_TEXT_BYTES];
    char detail[HILO_REMOTE_TEXT_BYTES];
    char hint[HILO_REMOTE_TEXT_BYTES];
} HiloRemoteError;

/* Fills *e (detail and hint may be NULL); texts are cut to fit. */
extern void hilo_remote_error_set(HiloRemoteError *e, int sqlerrcode, const char *message,
                                  const char *detail, const char *hint);
/* Fills *e from a caught error (CopyErrorData). */
extern void hilo_remote_error_from_edata(HiloRemoteError *e, const ErrorData *edata);
/* Fills *e from the fields of an error another node sent: its SQLSTATE as
 * five characters (NULL or malformed: XX000). */
extern void hilo_remote_error_from_fields(HiloRemoteError *e, const char *sqlstate,
                                          const char *message, const char *detail,
                                          const char *hint);
/* Whether *a and *b are the same error. */
extern bool hilo_remote_error_equal(const HiloRemoteError *a, const HiloRemoteError *b);
/* The SQLSTATE of *e as five characters and a NUL. */
extern void hilo_remote_error_sqlstate(const HiloRemoteError *e, char out[6]);

/* Raises what another process or node raised: its SQLSTATE, message,
 * detail and hint (empty ones left out). The one way hilo does it. */
extern void hilo_raise_remote(int sqlerrcode, const char *message, const char *detail,
                              const char *hint) pg_attribute_noreturn();
extern void hilo_rethrow_remote(const HiloRemoteError *e) pg_attribute_noreturn();

#endif /* HILO_PG_REMOTE_ERROR_H */
