// fusekit fusion-1 (norm-quantize): host-side bookkeeping of the q8_1 copies of MMVQ activations that one
// graph evaluation has already made. ggml-free (plain C++17) so that a CPU unit test can exercise it.
//
// The rules, and why:
// - An entry says "the arena bytes at [offset, offset + bytes) hold the q8_1 copy of the f32 tensor
//   described by key". Two keys are equal only if the f32 values read and the q8_1 layout are equal,
//   so a hit gives the same bytes as quantizing again.
// - Entries live for one graph evaluation at most (begin() forgets all). Between evaluations the host
//   may write inputs and the allocator reuses memory.
// - Within an evaluation, every executed node reports the bytes it wrote (written()); an entry whose
//   f32 source overlaps them is dropped. The one exception is an entry that the same step made *after*
//   its writes (a norm that writes f32 and q8_1 in one kernel): it describes the new values.
// - The arena is a bump allocator reset by begin(); the caller sizes it (wanted_bytes()).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fusekit_nq {

constexpr int64_t kQK = 32;          // values per q8_1 block
constexpr int64_t kBlockBytes = 36;  // sizeof(block_q8_1): half2 (d, sum) + 32 int8
constexpr size_t kArenaAlign = 256;  // same alignment as the CUDA pool gives

// What a q8_1 copy was made from. nb are byte strides; 4-d like ggml.
struct Key {
    uintptr_t data = 0;
    int64_t ne[4] = {0, 0, 0, 0};
    int64_t nb[4] = {0, 0, 0, 0};
    int64_t ne0_padded = 0;  // row length of the q8_1 copy (zero padded)

    bool operator==(const Key & o) const {
        if (data != o.data || ne0_padded != o.ne0_padded) {
            return false;
        }
        for (int i = 0; i < 4; ++i) {
            if (ne[i] != o.ne[i] || nb[i] != o.nb[i]) {
                return false;
            }
        }
        return true;
    }

    int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }

    // The q8_1 copy: nrows rows of ne0_padded/32 blocks, contiguous.
    size_t q8_bytes() const { return size_t(nrows() * (ne0_padded / kQK) * kBlockBytes); }

    // One past the last f32 byte read (like ggml_nbytes for a 4-byte type).
    uintptr_t end() const {
        if (ne[0] <= 0 || nrows() <= 0) {
            return data;
        }
        int64_t last = 4;
        for (int i = 0; i < 4; ++i) {
            last += (ne[i] - 1) * nb[i];
        }
        return data + uintptr_t(last);
    }
};

// A key for an f32 tensor (ne, nb as ggml gives them; nb[0] must be 4). A contiguous tensor is keyed as
// plain rows, so a reshape of it (the [n_embd, 1, n_tokens] view MUL_MAT_ID reads) matches the
// [n_embd, n_tokens] tensor itself. Otherwise strides of size-1 dims are zeroed: they are never used.
inline Key make_key(const void * data, const int64_t ne[4], const size_t nb[4], int64_t ne0_padded) {
    Key k;
    k.data = uintptr_t(data);
    k.ne0_padded = ne0_padded;
    const bool contiguous = nb[0] == 4 && int64_t(nb[1]) == 4 * ne[0] && int64_t(nb[2]) == int64_t(nb[1]) * ne[1] &&
                            int64_t(nb[3]) == int64_t(nb[2]) * ne[2];
    if (contiguous) {
        k.ne[0] = ne[0];
        k.ne[1] = ne[1] * ne[2] * ne[3];
        k.ne[2] = 1;
        k.ne[3] = 1;
        k.nb[0] = 4;
        k.nb[1] = 4 * ne[0];
        return k;
    }
    for (int i = 0; i < 4; ++i) {
        k.ne[i] = ne[i];
        k.nb[i] = ne[i] == 1 ? 0 : int64_t(nb[i]);
    }
    return k;
}

struct Entry {
    Key key;
    size_t offset = 0;    // into the arena
    uint32_t step = 0;    // graph step that made it
    bool after_write = false;  // made by a kernel that also wrote the f32 source (describes the new values)
};

class Cache {
  public:
    static constexpr int kMaxEntries = 16;

    // A new graph evaluation with an arena of capacity bytes (0: nothing is cached).
    void begin(size_t capacity) {
        n_ = 0;
        used_ = 0;
        wanted_ = 0;
        step_ = 0;
        capacity_ = capacity;
    }

    const Entry * find(const Key & key) const {
        for (int i = 0; i < n_; ++i) {
            if (entries_[i].key == key) {
                return &entries_[i];
            }
        }
        return nullptr;
    }

    // Arena space for a new entry made in the current step. False (nothing recorded) if it does not fit;
    // wanted_bytes() then tells the caller how large the arena should be next time.
    bool insert(const Key & key, bool after_write, size_t * offset) {
        const size_t bytes = key.q8_bytes();
        const size_t start = (used_ + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
        wanted_ += (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;  // counts the ones that do not fit too
        if (bytes == 0 || start + bytes > capacity_) {
            return false;
        }
        forget(key);  // an older copy of the same key describes values that are being replaced
        if (n_ == kMaxEntries) {  // forget the oldest; its arena bytes stay used until the next evaluation
            for (int i = 1; i < n_; ++i) {
                entries_[i - 1] = entries_[i];
            }
            --n_;
        }
        Entry & e = entries_[n_++];
        e.key = key;
        e.offset = start;
        e.step = step_;
        e.after_write = after_write;
        used_ = start + bytes;
        *offset = start;
        return true;
    }

    // A node of the current step wrote the bytes [lo, hi): drop the entries whose f32 source overlaps.
    void written(uintptr_t lo, uintptr_t hi) {
        int kept = 0;
        for (int i = 0; i < n_; ++i) {
            const Entry & e = entries_[i];
            const bool overlaps = e.key.data < hi && lo < e.key.end();
            const bool describes_new_values = e.after_write && e.step == step_;
            if (!overlaps || describes_new_values) {
                entries_[kept++] = e;
            }
        }
        n_ = kept;
    }

    void forget(const Key & key) {
        int kept = 0;
        for (int i = 0; i < n_; ++i) {
            if (!(entries_[i].key == key)) {
                entries_[kept++] = entries_[i];
            }
        }
        n_ = kept;
    }

    // The current step (one node, or one group of fused nodes) is done.
    void next_step() { ++step_; }

    int size() const { return n_; }
    size_t wanted_bytes() const { return wanted_; }

  private:
    Entry entries_[kMaxEntries];
    int n_ = 0;
    size_t used_ = 0;
    size_t capacity_ = 0;
    size_t wanted_ = 0;
    uint32_t step_ = 0;
};

}  // namespace fusekit_nq
