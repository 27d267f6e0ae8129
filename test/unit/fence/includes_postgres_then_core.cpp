// Must NOT compile: PostgreSQL-side code may include src/core/c_api.h only.
// CTest checks that the compiler stops here with the fence's message.
#include "postgres.h"
#include "range_list.hpp"
