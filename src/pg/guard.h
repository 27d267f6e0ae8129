/*
 * guard.h: the crossings from PostgreSQL into hilo's C++ (docs/design.md,
 * "Two regimes").
 *
 * Every symbol PostgreSQL calls catches every C++ exception, copies its
 * message, and raises the PostgreSQL error only after the catch block has
 * ended, when the exception object is gone: HILO_SQL_FUNCTION for SQL
 * functions, HILO_WORKER_MAIN for background worker entry points.
 * Included by hilo.h, after postgres.h.
 */
#ifndef HILO_PG_GUARD_H
#define HILO_PG_GUARD_H

/* Room for the message of a C++ exception crossing into PostgreSQL. */
#define HILO_GUARD_MESSAGE_BYTES 512

/*
 * In a build with AddressSanitizer (make SANITIZE=1) whose runtime is not
 * preloaded but comes in with hilo.so, it is too late to intercept
 * PostgreSQL's siglongjmp. An error that unwinds hilo's frames then leaves
 * their redzones poisoned on the stack, and later frames at those addresses
 * would be reported falsely. The interceptor would clear the stack below
 * the jump target; hilo does the same where control comes back after an
 * unwinding: at the entry of every SQL function and in every PG_CATCH.
 * (scripts/test.sh sanitize preloads the runtime, which then clears the
 * stack itself; the suite passes there without this too.) In other builds
 * this is nothing.
 */
#if defined(__SANITIZE_ADDRESS__)
static inline void __attribute__((noinline)) hilo_asan_forget_unwound_frames(void)
{
    /* Everything below this frame is dead. */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    const uintptr_t span = 1024 * 1024; /* more than max_stack_depth's default */
    __asan_unpoison_memory_region((const void *)(here - span), span);
}
#define HILO_FORGET_UNWOUND_FRAMES() hilo_asan_forget_unwound_frames()
#else
#define HILO_FORGET_UNWOUND_FRAMES() ((void)0)
#endif

/*
 * Declares an SQL-callable function whose body is `name##_body`. The body is
 * PostgreSQL-regime code; should any C++ exception reach this frame, it is
 * caught, its message copied, and the PostgreSQL error raised only after
 * the catch block has ended.
 */
extern void hilo_raise_cpp_exception(const char *function_name, const char *what)
    pg_attribute_noreturn();

#define HILO_SQL_FUNCTION(name)                               \
    static Datum name##_body(PG_FUNCTION_ARGS);               \
    extern "C" {                                              \
    PG_FUNCTION_INFO_V1(name);                                \
    Datum name(PG_FUNCTION_ARGS)                              \
    {                                                         \
        char what[HILO_GUARD_MESSAGE_BYTES];                  \
        HILO_FORGET_UNWOUND_FRAMES();                         \
        try {                                                 \
            return name##_body(fcinfo);                       \
        } catch (const std::exception &e) {                   \
            strlcpy(what, e.what(), sizeof(what));            \
        } catch (...) {                                       \
            strlcpy(what, "unknown exception", sizeof(what)); \
        }                                                     \
        hilo_raise_cpp_exception(#name, what);                \
    }                                                         \
    }                                                         \
    static Datum name##_body(PG_FUNCTION_ARGS)

/*
 * Defines the background worker entry point `name` (extern "C",
 * PGDLLEXPORT) that runs `body(main_arg)`; should a C++ exception reach it,
 * the worker exits with a FATAL error naming `what_runs` after the catch.
 */
#define HILO_WORKER_MAIN(name, body, what_runs)                                          \
    extern "C" PGDLLEXPORT void name(Datum main_arg)                                     \
    {                                                                                    \
        char what[HILO_GUARD_MESSAGE_BYTES];                                             \
        try {                                                                            \
            body(main_arg);                                                              \
            return;                                                                      \
        } catch (const std::exception &e) {                                              \
            strlcpy(what, e.what(), sizeof(what));                                       \
        } catch (...) {                                                                  \
            strlcpy(what, "unknown exception", sizeof(what));                            \
        }                                                                                \
        ereport(FATAL, (errcode(ERRCODE_INTERNAL_ERROR),                                 \
                        errmsg("unexpected C++ exception in " what_runs ": %s", what))); \
    }

#endif /* HILO_PG_GUARD_H */
