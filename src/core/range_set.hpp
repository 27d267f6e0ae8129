// RangeSet: a RangeList that owns growable storage, for code in the C++
// regime (tests, fuzzing, simulations). Shared memory uses RangeList directly.
#pragma once

#include "no_postgres.hpp"
#include "range_list.hpp"

#include <vector>

namespace hilo
{

class RangeSet
{
  public:
    RangeSet() = default;

    const std::vector<IdRange> &ranges() const { return ranges_; }
    bool empty() const { return ranges_.empty(); }
    uint64_t CountIds() const { return ConstView().CountIds(); }

    InsertStatus Insert(IdRange r, IdRange *conflict = nullptr)
    {
        ranges_.resize(ranges_.size() + 1);  // a merge may need one more slot
        InsertStatus status = View(1).Insert(r, conflict);
        Shrink();
        return status;
    }

    std::vector<IdRange> TakeLowest(uint64_t n)
    {
        std::vector<IdRange> out(ranges_.size());
        uint32_t out_count = 0;
        View().TakeLowest(n, out.data(), static_cast<uint32_t>(out.size()), &out_count);
        Shrink();
        out.resize(out_count);
        return out;
    }

    void Remove(IdRange r)
    {
        ranges_.resize(ranges_.size() + 1);  // a split needs one more slot
        View(1).Remove(r);
        Shrink();
    }

    bool FindOverlap(IdRange r, IdRange *overlap = nullptr) const
    {
        return ConstView().FindOverlap(r, overlap);
    }
    bool Contains(IdRange r) const { return ConstView().Contains(r); }

  private:
    // A view whose capacity is the vector's size; `spare` trailing slots are
    // free. count_ is kept in sync with the vector by Shrink().
    RangeList View(uint32_t spare = 0)
    {
        count_ = static_cast<uint32_t>(ranges_.size()) - spare;
        return RangeList(ranges_.data(), &count_, static_cast<uint32_t>(ranges_.size()));
    }
    RangeList ConstView() const
    {
        count_ = static_cast<uint32_t>(ranges_.size());
        return RangeList(const_cast<IdRange *>(ranges_.data()), &count_, count_);
    }
    void Shrink() { ranges_.resize(count_); }

    std::vector<IdRange> ranges_;
    mutable uint32_t count_ = 0;
};

}  // namespace hilo
