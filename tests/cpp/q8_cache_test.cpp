// CPU test of fusion-1's q8_1 cache bookkeeping (kernels/fusekit-q8-cache.h); run by tests/test_q8_cache.py.
#include "fusekit-q8-cache.h"

#include <cstdio>
#include <cstdlib>

using namespace fusekit_nq;

static int failures = 0;
#define EXPECT(cond)                                                  \
    do {                                                              \
        if (!(cond)) {                                                \
            std::printf("%s:%d: EXPECT(%s) failed\n", __FILE__, __LINE__, #cond); \
            ++failures;                                               \
        }                                                             \
    } while (0)

static Key key4(uintptr_t data, int64_t n0, int64_t n1, int64_t n2, int64_t n3, size_t b1, size_t b2, size_t b3,
                int64_t pad) {
    const int64_t ne[4] = {n0, n1, n2, n3};
    const size_t nb[4] = {4, b1, b2, b3};
    return make_key((const void *) data, ne, nb, pad);
}

static Key rows(uintptr_t data, int64_t n0, int64_t n1) {
    return key4(data, n0, n1, 1, 1, 4 * n0, 4 * n0 * n1, 4 * n0 * n1, (n0 + 511) / 512 * 512);
}

int main() {
    const uintptr_t A = 0x100000, B = 0x200000;

    // keys: a contiguous [2048, 1, 3] view (MUL_MAT_ID's src1) matches the [2048, 3] tensor
    EXPECT(rows(A, 2048, 3) == key4(A, 2048, 1, 3, 1, 8192, 8192, 24576, 2048));
    EXPECT(!(rows(A, 2048, 3) == rows(A, 2048, 2)));
    EXPECT(!(rows(A, 2048, 1) == rows(B, 2048, 1)));
    EXPECT(!(rows(A, 2048, 1) == key4(A, 2048, 1, 1, 1, 8192, 8192, 8192, 2560)));  // other padding
    // a strided view (row stride 2x) is not the contiguous tensor; its unused size-1 strides are ignored
    const Key strided = key4(A, 1024, 2, 1, 1, 8192, 16384, 16384, 1024);
    EXPECT(!(strided == rows(A, 1024, 2)));
    EXPECT(strided == key4(A, 1024, 2, 1, 1, 8192, 99, 77, 1024));
    EXPECT(strided.end() == A + 8192 + 4096);
    EXPECT(rows(A, 2048, 3).q8_bytes() == 3 * 64 * 36);
    EXPECT(rows(A, 300, 1).q8_bytes() == 16 * 36);  // padded to 512 values

    Cache c;
    size_t off = 0;

    // nothing fits in an empty arena; the demand is remembered for sizing the next one
    c.begin(0);
    EXPECT(!c.insert(rows(A, 2048, 1), false, &off));
    EXPECT(c.wanted_bytes() >= 2304);

    c.begin(1 << 20);
    EXPECT(c.wanted_bytes() == 0);
    EXPECT(c.insert(rows(A, 2048, 1), false, &off) && off == 0);
    EXPECT(c.find(rows(A, 2048, 1)) && c.find(rows(A, 2048, 1))->offset == 0);
    EXPECT(c.insert(rows(B, 2048, 1), false, &off) && off == 2304);  // 2304 = 9 * 256: already aligned
    EXPECT(off % kArenaAlign == 0);
    c.next_step();

    // a write elsewhere keeps both; a write overlapping A's last byte drops A only
    c.written(A + 8192, A + 9000);
    EXPECT(c.size() == 2);
    c.written(A + 8188, A + 8192);
    EXPECT(!c.find(rows(A, 2048, 1)) && c.find(rows(B, 2048, 1)));
    c.next_step();

    // a norm's copy (made after its write, same step) survives that step's own write ...
    EXPECT(c.insert(rows(A, 2048, 1), true, &off));
    c.written(A, A + 8192);
    EXPECT(c.find(rows(A, 2048, 1)));
    c.next_step();
    // ... but not a later write (an in-place ADD)
    c.written(A, A + 8192);
    EXPECT(!c.find(rows(A, 2048, 1)));
    c.next_step();

    // a product's copy (made before its step's writes) does not survive a write in its own step
    EXPECT(c.insert(rows(A, 2048, 1), false, &off));
    c.written(A + 4, A + 8);
    EXPECT(!c.find(rows(A, 2048, 1)));
    c.next_step();

    // a second copy of the same key replaces the first
    EXPECT(c.insert(rows(A, 2048, 1), false, &off));
    const size_t first = off;
    EXPECT(c.insert(rows(A, 2048, 1), false, &off) && off != first);
    EXPECT(c.find(rows(A, 2048, 1))->offset == off);

    // a full arena refuses, and the demand counts the refused copy
    c.begin(4096);
    EXPECT(c.insert(rows(A, 2048, 1), false, &off));
    EXPECT(!c.insert(rows(B, 2048, 1), false, &off));
    EXPECT(c.wanted_bytes() >= 2 * 2304);
    EXPECT(c.find(rows(A, 2048, 1)) && !c.find(rows(B, 2048, 1)));

    // more than kMaxEntries copies: the oldest is forgotten
    c.begin(1 << 24);
    for (int i = 0; i < Cache::kMaxEntries + 1; ++i) {
        EXPECT(c.insert(rows(A + uintptr_t(i) * 0x10000, 2048, 1), false, &off));
    }
    EXPECT(c.size() == Cache::kMaxEntries);
    EXPECT(!c.find(rows(A, 2048, 1)) && c.find(rows(A + 0x10000, 2048, 1)));

    // a new evaluation forgets everything
    c.begin(1 << 24);
    EXPECT(c.size() == 0 && !c.find(rows(A + 0x10000, 2048, 1)));

    std::printf("%s (%d failures)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
