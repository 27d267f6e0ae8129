// What the simulation tests share: a chooser that draws a world's every
// choice from a seeded PRNG (so a run repeats from its seed), a one-line
// report of a run's counters, and the test names of parameterised scenarios.
#pragma once

#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

namespace hilo
{
namespace sim
{

struct SeededChooser {
    explicit SeededChooser(uint64_t seed) : rng(seed) {}
    uint64_t operator()(uint64_t n) { return n == 0 ? 0 : rng() % n; }
    bool done() const { return false; }
    std::mt19937_64 rng;
};

// "steps=1 calls=2 ...": `names`, separated by spaces, each with its value.
inline std::string DescribeCounters(const std::string &names,
                                    std::initializer_list<uint64_t> values)
{
    std::istringstream in(names);
    std::string line;
    std::string name;
    for (uint64_t value : values) {
        if (!(in >> name))
            throw std::invalid_argument("more counters than names: " + names);
        line += (line.empty() ? "" : " ") + name + '=' + std::to_string(value);
    }
    if (in >> name)
        throw std::invalid_argument("more names than counters: " + names);
    return line;
}

// For INSTANTIATE_TEST_SUITE_P: a test's name from the `name` of its
// parameter, each character that is not a letter or a digit made '_'.
struct NameOfParam {
    template <class Info>
    std::string operator()(const Info &info) const
    {
        std::string name;
        for (const char *c = info.param.name; *c; ++c)
            name += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
        return name;
    }
};

}  // namespace sim
}  // namespace hilo
