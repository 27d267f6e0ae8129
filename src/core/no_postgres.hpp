// Included by every header of the pure C++ core.
//
// The core runs under C++ rules (exceptions, RAII, STL). PostgreSQL code
// unwinds with siglongjmp, which skips destructors, so the two must never mix
// in one translation unit. PostgreSQL-side code reaches the core only through
// c_api.h, which is plain data and noexcept functions.
#pragma once

#ifdef POSTGRES_H
static_assert(false,
              "src/core must not be compiled together with PostgreSQL headers; "
              "include src/core/c_api.h from PostgreSQL-side code instead");
#endif
