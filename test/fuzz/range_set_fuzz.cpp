// libFuzzer target: drives RangeSet (growable) and a fixed-capacity RangeList
// with random operations and compares every answer with a std::set<int64_t>
// oracle. IDs come from two small zones, one at 1 and one at 2^63 - 2, so the
// fuzzer reaches merges, splits and the domain bounds quickly. Some
// operations instead check the algorithms on plain arrays of ranges
// (SortAndCheckDisjoint, Normalize: hilo_push and the allocator rely on
// them) against a count of how many ranges hold each ID, and the
// allocation arithmetic (TakePrefix, IdsAbove, ClaimAbove) against 128-bit
// arithmetic.
//
// Short run: build-fuzz/range_set_fuzz -max_total_time=20 test/fuzz/corpus/range_set
#include "allocation.hpp"
#include "range_list.hpp"
#include "range_set.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

namespace
{

using hilo::IdRange;
using hilo::InsertStatus;
using Oracle = std::set<int64_t>;

[[noreturn]] void Fail(const char *what)
{
    std::fprintf(stderr, "range_set_fuzz: %s\n", what);
    std::abort();
}

void Check(bool ok, const char *what)
{
    if (!ok)
        Fail(what);
}

class Input
{
  public:
    Input(const uint8_t *data, size_t size) : data_(data), size_(size) {}
    bool empty() const { return pos_ >= size_; }
    uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
    // An ID in the low zone [1, 40] or the high zone [kMaxId - 39, kMaxId].
    int64_t Id(bool high) { return high ? hilo::kMaxId - Byte() % 40 : hilo::kMinId + Byte() % 40; }

  private:
    const uint8_t *data_;
    size_t size_;
    size_t pos_ = 0;
};

std::vector<IdRange> ToRanges(const Oracle &ids)
{
    std::vector<IdRange> out;
    for (int64_t id : ids) {
        if (!out.empty() && out.back().last + 1 == id)
            out.back().last = id;
        else
            out.push_back({id, id});
    }
    return out;
}

// The lowest run of IDs of [first, last] that are (want_present) or are not
// in `ids`. Returns false if there is none.
bool LowestRun(const Oracle &ids, IdRange r, bool want_present, IdRange *run)
{
    for (int64_t id = r.first;; ++id) {
        if ((ids.count(id) != 0) == want_present) {
            run->first = id;
            while (id < r.last && (ids.count(id + 1) != 0) == want_present)
                ++id;
            run->last = id;
            return true;
        }
        if (id == r.last)
            return false;
    }
}

bool AnyIn(const Oracle &ids, IdRange r)
{
    auto it = ids.lower_bound(r.first);
    return it != ids.end() && *it <= r.last;
}

void CheckWellFormed(const IdRange *begin, const IdRange *end)
{
    for (const IdRange *p = begin; p != end; ++p) {
        Check(hilo::IsValid(*p), "range out of domain");
        if (p != begin)
            Check(p[-1].last + 1 < p->first, "ranges not sorted, disjoint and merged");
    }
}

// One operation against one structure and its oracle. `list` may be a fixed
// capacity view; when it reports it is full, the oracle must stay as it was.
void Step(uint8_t op, IdRange r, uint64_t n, hilo::RangeList list, Oracle &oracle)
{
    switch (op % 6) {
        case 0: {  // insert
            IdRange conflict{};
            InsertStatus status = list.Insert(r, &conflict);
            if (!hilo::IsValid(r)) {
                Check(status == InsertStatus::kInvalid, "invalid range accepted");
            } else if (AnyIn(oracle, r)) {
                IdRange expect{};
                LowestRun(oracle, r, true, &expect);
                Check(status == InsertStatus::kOverlap, "overlap not detected");
                Check(conflict == expect, "wrong conflict reported");
            } else if (status == InsertStatus::kInserted) {
                for (int64_t id = r.first;; ++id) {
                    oracle.insert(id);
                    if (id == r.last)
                        break;
                }
            } else {
                Check(status == InsertStatus::kFull && list.size() == list.capacity(),
                      "insert refused without reason");
            }
            break;
        }
        case 1: {  // take lowest n
            std::vector<IdRange> out(list.size() + 1);
            uint32_t out_count = 0;
            uint64_t want = n % 30 + 1;
            uint64_t got =
                list.TakeLowest(want, out.data(), static_cast<uint32_t>(out.size()), &out_count);
            Oracle taken;
            while (taken.size() < want && !oracle.empty()) {
                taken.insert(*oracle.begin());
                oracle.erase(oracle.begin());
            }
            Check(got == taken.size(), "took the wrong number of IDs");
            out.resize(out_count);
            Check(out == ToRanges(taken), "did not take the lowest IDs");
            break;
        }
        case 2: {  // remove
            if (!hilo::IsValid(r))
                break;
            if (list.Remove(r)) {
                for (auto it = oracle.lower_bound(r.first); it != oracle.end() && *it <= r.last;)
                    it = oracle.erase(it);
            } else {
                Check(list.size() == list.capacity(), "remove refused without reason");
            }
            break;
        }
        case 3: {  // overlap query
            if (!hilo::IsValid(r))
                break;
            IdRange hit{}, expect{};
            bool found = list.FindOverlap(r, &hit);
            Check(found == AnyIn(oracle, r), "overlap query wrong");
            if (found) {
                LowestRun(oracle, r, true, &expect);
                Check(hit == expect, "overlap query named the wrong run");
            }
            break;
        }
        case 4: {  // contains and coverage
            if (!hilo::IsValid(r))
                break;
            IdRange gap{}, expect{};
            bool has_gap = hilo::FindUncovered(list.begin(), list.size(), r, &gap);
            bool oracle_gap = LowestRun(oracle, r, false, &expect);
            Check(has_gap == oracle_gap, "coverage query wrong");
            Check(list.Contains(r) == !oracle_gap, "contains wrong");
            if (has_gap)
                Check(gap == expect, "coverage query named the wrong gap");
            break;
        }
        case 5: {  // count
            Check(list.CountIds() == oracle.size(), "count wrong");
            break;
        }
    }
    CheckWellFormed(list.begin(), list.end());
    Check(std::vector<IdRange>(list.begin(), list.end()) == ToRanges(oracle),
          "contents differ from the oracle");
}

// Up to six valid ranges, unsorted, possibly overlapping or adjacent, as
// SortAndCheckDisjoint and Normalize get them; checks both against the
// number of input ranges that hold each ID.
void CheckArrayAlgorithms(Input &in, bool high)
{
    std::vector<IdRange> input(in.Byte() % 7);
    std::map<int64_t, int> holders;
    for (IdRange &r : input) {
        int64_t a = in.Id(high), b = in.Id(high);
        r = a <= b ? IdRange{a, b} : IdRange{b, a};
        for (int64_t id = r.first;; ++id) {
            ++holders[id];
            if (id == r.last)
                break;
        }
    }
    Oracle all;
    int64_t lowest_shared = 0;
    for (const auto &h : holders) {
        all.insert(h.first);
        if (h.second > 1 && lowest_shared == 0)
            lowest_shared = h.first;
    }

    std::vector<IdRange> sorted = input;
    IdRange a{}, b{};
    bool disjoint = hilo::SortAndCheckDisjoint(sorted.data(), sorted.size(), &a, &b);
    Check(disjoint == (lowest_shared == 0), "disjointness wrong");
    Check(std::is_permutation(sorted.begin(), sorted.end(), input.begin()),
          "sorting lost or changed a range");
    if (disjoint) {
        for (size_t i = 1; i < sorted.size(); ++i)
            Check(sorted[i - 1].first < sorted[i].first, "not sorted");
    } else {
        // Two of the input ranges (the same one given twice if a == b),
        // sharing the lowest ID that any two share.
        auto count = [&](IdRange r) { return std::count(input.begin(), input.end(), r); };
        Check(count(a) >= (a == b ? 2 : 1) && count(b) >= 1, "named a range not given");
        Check(hilo::Overlaps(a, b) && std::max(a.first, b.first) == lowest_shared,
              "named the wrong overlapping pair");
    }

    std::vector<IdRange> merged = input;
    merged.resize(hilo::Normalize(merged.data(), merged.size()));
    Check(merged == ToRanges(all), "normalize did not give the union, sorted and merged");
}

// The allocation arithmetic near both ends of the domain.
void CheckArithmetic(Input &in, bool high)
{
    int64_t available_a = in.Id(high), available_b = in.Id(high);
    IdRange available = available_a <= available_b ? IdRange{available_a, available_b}
                                                   : IdRange{available_b, available_a};
    uint8_t size_byte = in.Byte();
    // Sizes: small, or far beyond the domain.
    uint64_t want = size_byte & 0x80 ? ~uint64_t{0} - size_byte : size_byte % 50;
    using Wide = __int128;
    if (want > 0) {
        IdRange got = hilo::TakePrefix(available, want);
        Wide length = std::min<Wide>(want, Wide{available.last} - available.first + 1);
        Check(got.first == available.first && Wide{got.last} - got.first + 1 == length,
              "take prefix wrong");
    }

    // The high-water mark may be kMinId - 1 (nothing claimed yet).
    int64_t hwm = in.Id(high) - (high ? 0 : 1);
    int64_t max_value = in.Id(in.Byte() & 1 ? !high : high);
    Wide room = std::max<Wide>(0, Wide{max_value} - hwm);
    Check(hilo::IdsAbove(hwm, max_value) == static_cast<uint64_t>(room), "ids above wrong");
    IdRange window{};
    bool claimed = hilo::ClaimAbove(hwm, max_value, want, &window);
    Check(claimed == (room > 0 && want > 0), "claim above refused or granted wrongly");
    if (claimed)
        Check(window.first == hwm + 1 &&
                  Wide{window.last} - window.first + 1 == std::min<Wide>(want, room) &&
                  hilo::IsValid(window) && window.last <= max_value,
              "claimed the wrong window");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Input in(data, size);
    hilo::RangeSet growable;
    Oracle growable_oracle;
    IdRange fixed_storage[5];
    uint32_t fixed_count = 0;
    Oracle fixed_oracle;

    while (!in.empty()) {
        uint8_t op = in.Byte();
        bool high = op & 0x80;
        if (op % 8 == 6) {
            CheckArrayAlgorithms(in, high);
            continue;
        }
        if (op % 8 == 7) {
            CheckArithmetic(in, high);
            continue;
        }
        IdRange r{in.Id(high), in.Id(high)};
        if (op & 0x40)
            r = {r.last, r.first};  // often inverted: must be refused, not mangled
        uint64_t n = in.Byte();

        // The growable set, through its own API.
        std::vector<IdRange> before = growable.ranges();
        std::vector<IdRange> scratch = before;
        scratch.resize(before.size() + 2);
        uint32_t count = static_cast<uint32_t>(before.size());
        Step(op, r, n, hilo::RangeList(scratch.data(), &count, count + 2), growable_oracle);
        scratch.resize(count);
        // Replay the same operation through RangeSet and compare.
        switch (op % 6) {
            case 0:
                growable.Insert(r);
                break;
            case 1:
                growable.TakeLowest(n % 30 + 1);
                break;
            case 2:
                if (hilo::IsValid(r))
                    growable.Remove(r);
                break;
            default:
                break;
        }
        Check(growable.ranges() == scratch, "RangeSet and RangeList disagree");

        // A list with room for five ranges only.
        Step(op, r, n, hilo::RangeList(fixed_storage, &fixed_count, 5), fixed_oracle);
    }
    return 0;
}
