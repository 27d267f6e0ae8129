// RangeList: sorted, disjoint, merged ranges in caller-owned storage.
#include "range_list.hpp"

#include <algorithm>
#include <cstring>

namespace hilo
{

uint64_t RangeList::CountIds() const noexcept
{
    uint64_t total = 0;
    for (const IdRange &r : *this)
        total += Length(r);
    return total;
}

uint32_t RangeList::LowerBoundByLast(int64_t id) const noexcept
{
    const IdRange *it = std::lower_bound(begin(), end(), id,
                                         [](const IdRange &r, int64_t v) { return r.last < v; });
    return static_cast<uint32_t>(it - begin());
}

void RangeList::EraseAt(uint32_t index, uint32_t how_many) noexcept
{
    // Nothing to move happens on an empty list, whose storage may be a null
    // pointer (an empty std::vector's data()): memmove from or to NULL is
    // undefined even for zero bytes (UBSan in the fuzz target).
    size_t tail = sizeof(IdRange) * (*count_ - index - how_many);
    if (tail > 0)
        std::memmove(data_ + index, data_ + index + how_many, tail);
    *count_ -= how_many;
}

void RangeList::OpenGapAt(uint32_t index) noexcept
{
    std::memmove(data_ + index + 1, data_ + index, sizeof(IdRange) * (*count_ - index));
    ++*count_;
}

InsertStatus RangeList::Insert(IdRange r, IdRange *conflict) noexcept
{
    if (!IsValid(r))
        return InsertStatus::kInvalid;

    // j: first range that ends at or after r.first, the only one that can
    // overlap r first; the one before it may touch r from the left.
    uint32_t j = LowerBoundByLast(r.first);
    if (j < size() && data_[j].first <= r.last) {
        if (conflict)
            *conflict = Intersection(data_[j], r);
        return InsertStatus::kOverlap;
    }
    bool joins_left = j > 0 && Touches(data_[j - 1], r);
    bool joins_right = j < size() && Touches(r, data_[j]);

    if (joins_left && joins_right) {
        data_[j - 1].last = data_[j].last;
        EraseAt(j, 1);
    } else if (joins_left) {
        data_[j - 1].last = r.last;
    } else if (joins_right) {
        data_[j].first = r.first;
    } else {
        if (size() >= capacity_)
            return InsertStatus::kFull;
        OpenGapAt(j);
        data_[j] = r;
    }
    return InsertStatus::kInserted;
}

uint64_t RangeList::TakeLowest(uint64_t n, IdRange *out, uint32_t out_capacity,
                               uint32_t *out_count) noexcept
{
    uint64_t taken = 0;
    uint32_t whole = 0;  // ranges consumed completely
    *out_count = 0;
    while (taken < n && whole < size() && *out_count < out_capacity) {
        IdRange &r = data_[whole];
        uint64_t want = n - taken;
        if (Length(r) <= want) {
            out[(*out_count)++] = r;
            taken += Length(r);
            ++whole;
        } else {
            // Split: hand out the low part, keep the rest in place.
            IdRange low{r.first, r.first + static_cast<int64_t>(want) - 1};
            out[(*out_count)++] = low;
            r.first = low.last + 1;
            taken += want;
        }
    }
    EraseAt(0, whole);
    return taken;
}

bool RangeList::Remove(IdRange r) noexcept
{
    uint32_t j = LowerBoundByLast(r.first);
    if (j >= size() || data_[j].first > r.last)
        return true;  // nothing to remove

    IdRange &hit = data_[j];
    if (hit.first < r.first && hit.last > r.last) {
        // r sits strictly inside one range: split it in two.
        if (size() >= capacity_)
            return false;
        IdRange high{r.last + 1, hit.last};
        hit.last = r.first - 1;
        OpenGapAt(j + 1);
        data_[j + 1] = high;
        return true;
    }
    if (hit.first < r.first) {
        hit.last = r.first - 1;  // keep the part below r
        ++j;
    }
    uint32_t k = j;  // ranges [j, k) lie wholly inside r
    while (k < size() && data_[k].last <= r.last)
        ++k;
    if (k < size() && data_[k].first <= r.last)
        data_[k].first = r.last + 1;  // keep the part above r
    EraseAt(j, k - j);
    return true;
}

bool RangeList::FindOverlap(IdRange r, IdRange *overlap) const noexcept
{
    uint32_t j = LowerBoundByLast(r.first);
    if (j < size() && data_[j].first <= r.last) {
        if (overlap)
            *overlap = Intersection(data_[j], r);
        return true;
    }
    return false;
}

bool RangeList::Contains(IdRange r) const noexcept
{
    uint32_t j = LowerBoundByLast(r.first);
    return j < size() && data_[j].first <= r.first && data_[j].last >= r.last;
}

bool SortAndCheckDisjoint(IdRange *ranges, size_t n, IdRange *a, IdRange *b) noexcept
{
    std::sort(ranges, ranges + n, [](const IdRange &x, const IdRange &y) {
        return x.first < y.first || (x.first == y.first && x.last < y.last);
    });
    // After sorting, a range overlaps an earlier one iff it starts at or
    // before the highest end seen so far.
    for (size_t i = 1, widest = 0; i < n; ++i) {
        if (ranges[i].first <= ranges[widest].last) {
            *a = ranges[widest];
            *b = ranges[i];
            return false;
        }
        if (ranges[i].last > ranges[widest].last)
            widest = i;
    }
    return true;
}

size_t Normalize(IdRange *ranges, size_t n) noexcept
{
    if (n == 0)
        return 0;
    std::sort(ranges, ranges + n,
              [](const IdRange &x, const IdRange &y) { return x.first < y.first; });
    size_t out = 0;
    for (size_t i = 1; i < n; ++i) {
        IdRange &cur = ranges[out];
        if (ranges[i].first <= cur.last || Touches(cur, ranges[i])) {
            if (ranges[i].last > cur.last)
                cur.last = ranges[i].last;
        } else {
            ranges[++out] = ranges[i];
        }
    }
    return out + 1;
}

bool FindUncovered(const IdRange *covering, size_t n, IdRange query, IdRange *gap) noexcept
{
    int64_t next = query.first;  // lowest ID of `query` not yet shown covered
    const IdRange *it = std::lower_bound(covering, covering + n, query.first,
                                         [](const IdRange &r, int64_t v) { return r.last < v; });
    for (; it != covering + n; ++it) {
        if (it->first > next) {
            gap->first = next;
            gap->last = std::min(query.last, it->first - 1);
            return true;
        }
        if (it->last >= query.last)
            return false;
        next = it->last + 1;
    }
    gap->first = next;
    gap->last = query.last;
    return true;
}

}  // namespace hilo
