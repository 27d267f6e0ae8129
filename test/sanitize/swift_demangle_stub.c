/*
 * Preloaded next to the ASan runtime by scripts/test.sh's sanitize stage.
 *
 * PostgreSQL is not built with ASan, so the runtime initialises lazily, on
 * the first malloc, which comes from a library constructor inside glibc's
 * newlocale() or bindtextdomain() with glibc's locale lock held. The
 * runtime's initialisation looks up swift_demangle with dlsym() and calls
 * dlerror(), which translates its message through gettext and takes that
 * same lock: the lock's count is corrupted and postgres, psql and initdb
 * hang at start. With this symbol present, dlsym() finds it, dlerror() has
 * nothing to translate, and nothing takes the lock. The runtime only calls
 * it for Swift symbols, which never occur here.
 */
#include <stddef.h>

char *swift_demangle(const char *mangled, size_t mangled_length, char *out, size_t *out_length,
                     unsigned flags);

char *swift_demangle(const char *mangled, size_t mangled_length, char *out, size_t *out_length,
                     unsigned flags)
{
    (void)mangled;
    (void)mangled_length;
    (void)out;
    (void)out_length;
    (void)flags;
    return NULL;
}
