package org.hilo;

/** An inclusive range of IDs, {@code first} to {@code last}. */
public record IdRange(long first, long last) {
    public IdRange {
        if (first > last) {
            throw new IllegalArgumentException("first " + first + " > last " + last);
        }
    }

    /** How many IDs the range holds. */
    public long count() {
        return last - first + 1;
    }

    /** How many IDs a list of ranges holds. */
    public static long count(Iterable<IdRange> ranges) {
        long n = 0;
        for (IdRange r : ranges) {
            n += r.count();
        }
        return n;
    }

    @Override
    public String toString() {
        return "[" + first + ", " + last + "]";
    }
}
