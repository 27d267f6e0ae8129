// Turns a fuzzer's input bytes into the choices of a simulated world: one
// byte per choice among up to 256 options, two bytes above. When the bytes
// run out, done() says so and every further choice is 0. FuzzWorld runs a
// simulated world on them for a fuzz target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace hilo
{
namespace sim
{

class ByteChooser
{
  public:
    ByteChooser(const uint8_t *data, size_t size) : data_(data), size_(size) {}
    bool empty() const { return pos_ >= size_; }
    bool done() const { return empty(); }
    uint64_t operator()(uint64_t n)
    {
        if (n <= 1)
            return 0;
        uint64_t v = Byte();
        if (n > 256)
            v = (v << 8) | Byte();
        return v % n;
    }

  private:
    uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }

    const uint8_t *data_;
    size_t size_;
    size_t pos_ = 0;
};

// A fuzz target's run of a simulated world: steps `world` with the choices
// in `data` until they run out or a check fails, and aborts naming `target`
// on the first violation.
template <typename World>
int FuzzWorld(World &world, const uint8_t *data, size_t size, const char *target)
{
    ByteChooser choose(data, size);
    while (!choose.empty() && world.ok())
        world.Step(choose);
    if (!world.ok()) {
        std::fprintf(stderr, "%s: %s\n", target, world.violation().c_str());
        std::abort();
    }
    return 0;
}

}  // namespace sim
}  // namespace hilo
