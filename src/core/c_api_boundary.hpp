// c_api_boundary.hpp: what the core's C entry points share where C++ meets
// C (lease_c_api.cpp, quorum_c_api.cpp): text copied into a caller's buffer,
// queued items handed out, and every exception stopped at the boundary. For
// the .cpp files behind the C headers only; never included by a C header.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace hilo::boundary
{

// Copies text into buffer (size bytes, the NUL included), cut short to fit.
inline void CopyText(std::string_view text, char *buffer, size_t size) noexcept
{
    if (buffer == nullptr || size == 0)
        return;
    const size_t n = std::min(text.size(), size - 1);
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
}

// Appends what the core handed over (a vector it gave up) to a queue.
template <class Queue, class Items>
void Append(Queue &queue, Items &&items)
{
    for (auto &item : items)
        queue.push_back(std::move(item));
}

// Moves up to `capacity` items from the front of `*queue` (none when it is
// NULL: the caller's handle was) into `out`, each through `convert`; returns
// how many.
template <class Queue, class Out, class Convert>
uint32_t TakeFront(Queue *queue, Out *out, uint32_t capacity, Convert convert) noexcept
{
    uint32_t n = 0;
    while (queue != nullptr && out != nullptr && n < capacity && !queue->empty()) {
        out[n++] = convert(queue->front());
        queue->pop_front();
    }
    return n;
}

// Records why a step stopped: the exception's message, or `fallback` when it
// has none. Never throws; with no memory even for that, leaves "?" (a short
// string needs no allocation), so `error` is never empty afterwards.
inline void SetError(std::string *error, const char *what, const char *fallback) noexcept
{
    try {
        error->assign(what != nullptr && what[0] != '\0' ? what : fallback);
    } catch (...) {
    }
    if (error->empty()) {
        try {
            error->assign(1, '?');
        } catch (...) {
        }
    }
}

// Runs `step`; when it throws, records why in `error` and returns false.
template <class Step>
bool Guarded(std::string *error, const char *fallback, Step step) noexcept
{
    try {
        step();
        return true;
    } catch (const std::exception &e) {
        SetError(error, e.what(), fallback);
    } catch (...) {
        SetError(error, nullptr, fallback);
    }
    return false;
}

// Runs `make`, which returns a new handle or throws; a throw becomes NULL and
// its message in the caller's `error` buffer.
template <class Make>
auto CreateOrExplain(char *error, size_t error_size, Make make) noexcept -> decltype(make())
{
    try {
        return make();
    } catch (const std::exception &e) {
        CopyText(e.what(), error, error_size);
    } catch (...) {
        CopyText("unknown error", error, error_size);
    }
    return nullptr;
}

}  // namespace hilo::boundary
