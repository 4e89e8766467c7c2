#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "pyflame/caching_allocator.h"
#include "pyflame/error.h"

using namespace pyflame;

namespace {

using Stream = DeviceMemorySource::Stream;
constexpr size_t KiB = size_t(1) << 10;
constexpr size_t MiB = size_t(1) << 20;

int g_stream_tags[4];
Stream kA = nullptr;  // the default stream
Stream kB = &g_stream_tags[1];
Stream kC = &g_stream_tags[2];
Stream kD = &g_stream_tags[3];

// Device memory from the host heap with a capacity; streams that are busy
// until the test says otherwise; events that complete with their stream.
class FakeSource : public DeviceMemorySource {
 public:
  explicit FakeSource(size_t capacity = SIZE_MAX / 2) : capacity_(capacity) {}
  ~FakeSource() override {
    for (auto& [p, n] : live_) ::operator delete(p, std::align_val_t(512));
    for (FakeEvent* e : events_) delete e;
  }

  void* raw_allocate(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes > capacity_ - used_) return nullptr;
    void* p = ::operator new(bytes, std::align_val_t(512));
    live_[p] = bytes;
    used_ += bytes;
    ++raw_allocs;
    last_request = bytes;
    return p;
  }
  void raw_free(void* ptr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) {
      ++bad_frees;
      return;
    }
    used_ -= it->second;
    live_.erase(it);
    ::operator delete(ptr, std::align_val_t(512));
    ++raw_frees;
  }
  Event record_event(Stream stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto* e = new FakeEvent{stream, busy_.count(stream) == 0};
    events_.insert(e);
    ++events_recorded;
    return e;
  }
  bool event_done(Event event) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++event_queries;
    return static_cast<FakeEvent*>(event)->done;
  }
  void release_event(Event event) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto* e = static_cast<FakeEvent*>(event);
    if (!events_.erase(e)) ++bad_frees;
    delete e;
  }
  bool stream_idle(Stream stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stream_queries;
    return busy_.count(stream) == 0;
  }
  void memory_info(size_t* free_bytes, size_t* total_bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    *free_bytes = capacity_ - used_;
    *total_bytes = capacity_;
  }
  std::string describe() const override { return "fake:0"; }

  // A busy stream has work pending; making it idle completes its events.
  void set_busy(Stream s, bool busy) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (busy) {
      busy_.insert(s);
      return;
    }
    busy_.erase(s);
    for (FakeEvent* e : events_)
      if (e->stream == s) e->done = true;
  }
  size_t used() {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_;
  }
  size_t live_events() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_.size();
  }
  size_t raw_size(void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(p);
    return it == live_.end() ? 0 : it->second;
  }

  std::atomic<size_t> raw_allocs{0}, raw_frees{0}, bad_frees{0}, events_recorded{0}, last_request{0};
  std::atomic<size_t> event_queries{0}, stream_queries{0};

 private:
  struct FakeEvent {
    Stream stream;
    bool done;
  };
  std::mutex mutex_;
  size_t capacity_;
  size_t used_ = 0;
  std::unordered_map<void*, size_t> live_;
  std::unordered_set<FakeEvent*> events_;
  std::unordered_set<Stream> busy_;
};

char* at(void* p, size_t off) { return static_cast<char*>(p) + off; }

// The segment that holds `p` (by address).
MemorySegmentInfo segment_of(const CachingAllocator& a, void* p) {
  auto u = reinterpret_cast<uintptr_t>(p);
  for (auto& s : a.snapshot())
    if (u >= s.address && u < s.address + s.size) return s;
  FAIL("no segment holds the pointer");
  return {};
}

bool is_whole_and_free(const MemorySegmentInfo& s) {
  return s.blocks.size() == 1 && !s.blocks[0].allocated && !s.blocks[0].pending && s.blocks[0].size == s.size;
}

CachingAllocator::Config pooled() { return {}; }

}  // namespace

TEST_CASE("caching allocator: sizes are rounded to 512 bytes") {
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::round_size(MiB + 1) == MiB + 512);
  CHECK(CachingAllocator::segment_size(512) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(MiB) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(MiB + 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(10 * MiB - 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(10 * MiB) == 10 * MiB);
  CHECK(CachingAllocator::segment_size(11 * MiB) == 12 * MiB);

  FakeSource src;
  CachingAllocator a(src, pooled());
  void* p = a.allocate(1);
  void* q = a.allocate(700);
  CHECK(a.block_size(p) == 512);
  CHECK(a.block_size(q) == 1024);
  CHECK(q == at(p, 512));
  CHECK(a.stats().total_allocated == 1536);
  CHECK(a.allocate(0) == nullptr);
  a.deallocate(nullptr);
  CHECK(a.stats().total_allocations == 2);
  a.deallocate(p);
  a.deallocate(q);
}

TEST_CASE("caching allocator: small and large pools and their segment sizes") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  void* s1 = a.allocate(MiB);  // largest small request
  void* s2 = a.allocate(MiB);
  CHECK(src.raw_allocs == 1);
  CHECK(s2 == at(s1, MiB));
  CHECK(src.last_request == 2 * MiB);
  auto seg = segment_of(a, s1);
  CHECK(seg.small_pool);
  CHECK(seg.size == 2 * MiB);

  void* big = a.allocate(11 * MiB + 1);  // >= 10 MiB: own segment rounded to 2 MiB
  CHECK(src.raw_allocs == 2);
  CHECK(src.last_request == 12 * MiB);
  CHECK(a.block_size(big) == 12 * MiB);  // the 1 MiB - 512 left is too small to split off
  CHECK(segment_of(a, big).blocks.size() == 1);

  void* l1 = a.allocate(MiB + 1);  // smallest large request: a 20 MiB segment
  CHECK(src.raw_allocs == 3);
  CHECK(src.last_request == 20 * MiB);
  CHECK(a.block_size(l1) == MiB + 512);
  void* l2 = a.allocate(3 * MiB);
  CHECK(src.raw_allocs == 3);
  CHECK(l2 == at(l1, MiB + 512));
  CHECK_FALSE(segment_of(a, l1).small_pool);
  void* l3 = a.allocate(11 * MiB);  // a large request may also come from a 20 MiB segment's rest
  CHECK(l3 == at(l2, 3 * MiB));
  CHECK(src.raw_allocs == 3);
  a.deallocate(l3);
  for (void* p : {s1, s2, l1, l2, big}) a.deallocate(p);
  CHECK(a.stats().segments == 3);
  a.empty_cache();
  CHECK(src.raw_frees == 3);
  CHECK(src.used() == 0);
}

TEST_CASE("caching allocator: large blocks are split only when more than 1 MiB is left") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  void* p = a.allocate(19 * MiB);  // a 20 MiB segment, 1 MiB left: not split
  CHECK(src.last_request == 20 * MiB);
  CHECK(a.block_size(p) == 20 * MiB);
  CHECK(a.stats().total_allocated == 20 * MiB);
  a.deallocate(p);
  void* q = a.allocate(19 * MiB - 512);  // from the cache, 1 MiB + 512 left: split
  CHECK(q == p);
  CHECK(a.block_size(q) == 19 * MiB - 512);
  auto seg = segment_of(a, q);
  REQUIRE(seg.blocks.size() == 2);
  CHECK(seg.blocks[1].size == MiB + 512);
  CHECK_FALSE(seg.blocks[1].allocated);
  a.deallocate(q);
  CHECK(is_whole_and_free(segment_of(a, q)));
  CHECK(src.raw_allocs == 1);
}

TEST_CASE("caching allocator: split blocks merge back in any free order") {
  std::vector<int> order = {0, 1, 2, 3};
  do {
    FakeSource src;
    CachingAllocator a(src, pooled());
    void* p[4] = {a.allocate(1000), a.allocate(3 * 512), a.allocate(4 * KiB), a.allocate(100 * KiB)};
    CHECK(src.raw_allocs == 1);
    CHECK(p[1] == at(p[0], 1024));
    CHECK(p[2] == at(p[1], 1536));
    CHECK(p[3] == at(p[2], 4096));
    CHECK(segment_of(a, p[0]).blocks.size() == 5);  // four blocks and the free rest
    for (int i : order) a.deallocate(p[i]);
    auto seg = segment_of(a, p[0]);
    CHECK(is_whole_and_free(seg));
    CHECK(seg.address == reinterpret_cast<uintptr_t>(p[0]));
    // The whole segment is reused: two 1 MiB requests fit without a new segment.
    void* x = a.allocate(MiB);
    void* y = a.allocate(MiB);
    CHECK(x == p[0]);
    CHECK(y == at(x, MiB));
    CHECK(src.raw_allocs == 1);
    a.deallocate(y);
    a.deallocate(x);
    CHECK(src.raw_frees == 0);
    a.empty_cache();
    CHECK(src.raw_frees == 1);
    CHECK(src.used() == 0);
    CHECK(a.stats().reserved_bytes == 0);
    CHECK(a.stats().segments == 0);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST_CASE("caching allocator: best fit among the free blocks") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  void* b4 = a.allocate(4 * KiB);
  void* g1 = a.allocate(512);
  void* b2 = a.allocate(2 * KiB);
  void* g2 = a.allocate(512);
  void* b8 = a.allocate(8 * KiB);
  void* g3 = a.allocate(512);
  a.deallocate(b4);
  a.deallocate(b2);
  a.deallocate(b8);
  CHECK(a.allocate(1500) == b2);  // 2 KiB is the smallest that fits; 512 B split off
  CHECK(a.allocate(3000) == b4);
  CHECK(a.allocate(5000) == b8);
  CHECK(a.allocate(512) == at(b2, 1536));  // the 512 B left of b2
  CHECK(src.raw_allocs == 1);
  a.empty_cache();
  CHECK(src.raw_frees == 0);  // nothing fully free
  (void)g1, (void)g2, (void)g3;
}

TEST_CASE("caching allocator: a stream reuses its own blocks at once") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  src.set_busy(kB, true);  // B's earlier kernels may still be running
  void* p = a.allocate(64 * KiB, kB);
  a.deallocate(p);
  CHECK(a.allocate(64 * KiB, kB) == p);  // later work on B is ordered after them
  CHECK(a.stats().cache_hits == 1);
  a.deallocate(p);
}

TEST_CASE("caching allocator: another stream reuses a block only once its stream is idle") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  src.set_busy(kA, true);
  void* p = a.allocate(4 * KiB, kA);
  a.deallocate(p);
  void* q = a.allocate(4 * KiB, kB);  // A is busy: B gets a segment of its own
  CHECK(src.raw_allocs == 2);
  CHECK(segment_of(a, q).address != segment_of(a, p).address);
  a.deallocate(q);
  src.set_busy(kB, true);
  void* r = a.allocate(4 * KiB, kC);  // A and B busy
  CHECK(src.raw_allocs == 3);
  src.set_busy(kA, false);
  a.deallocate(r);
  src.set_busy(kC, true);
  void* s = a.allocate(4 * KiB, kD);  // A is idle now: its free block is taken
  CHECK(src.raw_allocs == 3);
  CHECK(s == p);
  CHECK(segment_of(a, s).blocks[0].stream == kD);
  a.deallocate(s);  // back to D's pool
  src.set_busy(kD, true);
  CHECK(a.allocate(4 * KiB, kD) == p);
}

TEST_CASE("caching allocator: blocks of different streams merge only when safe") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  void* x = a.allocate(KiB, kA);
  void* y = a.allocate(KiB, kA);
  a.deallocate(x);
  void* p = a.allocate(KiB, kB);  // A is idle: B takes x (best fit)
  REQUIRE(p == x);
  src.set_busy(kA, true);
  src.set_busy(kB, true);
  a.deallocate(p);  // free on B
  a.deallocate(y);  // free on A: merges with the rest of A's segment, not with B's block
  auto seg = segment_of(a, x);
  REQUIRE(seg.blocks.size() == 2);
  CHECK(seg.blocks[0].stream == kB);
  CHECK(seg.blocks[0].size == KiB);
  CHECK(seg.blocks[1].stream == kA);
  CHECK(seg.blocks[1].address == reinterpret_cast<uintptr_t>(y));
  CHECK(a.allocate(KiB, kA) == y);  // not B's block while B is busy
  src.set_busy(kB, false);
  a.deallocate(y);  // B is idle: its block's work is done, so they merge
  seg = segment_of(a, x);
  CHECK(is_whole_and_free(seg));
  CHECK(seg.blocks[0].stream == kA);
  // A fully free segment is released even when its blocks did not merge.
  src.set_busy(kA, false);
  CHECK(a.allocate(KiB, kB) == x);  // A is idle: B takes its block
  void* z = a.allocate(KiB, kA);
  CHECK(z == at(x, KiB));
  src.set_busy(kA, true);
  src.set_busy(kB, true);
  a.deallocate(x);
  a.deallocate(z);
  CHECK(segment_of(a, x).blocks.size() == 2);
  a.empty_cache();
  CHECK(src.used() == 0);
}

TEST_CASE("caching allocator: record_stream holds a block until its events complete") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  src.set_busy(kB, true);
  src.set_busy(kC, true);
  void* p = a.allocate(4 * KiB, kA);
  a.record_stream(p, kB);
  a.record_stream(p, kB);  // once per stream
  a.record_stream(p, kA);  // its own stream: nothing to wait for
  a.record_stream(p, kC);
  a.deallocate(p);
  CHECK(src.events_recorded == 2);
  CHECK(src.live_events() == 2);
  auto st = a.stats();
  CHECK(st.total_allocated == 0);
  CHECK(st.total_deallocations == 1);
  CHECK(st.pending_bytes == 4 * KiB);
  CHECK(segment_of(a, p).blocks[0].pending);
  CHECK_THROWS_AS(a.deallocate(p), std::invalid_argument);  // no longer the user's

  void* q = a.allocate(4 * KiB, kA);  // p is held: q comes after it
  CHECK(q == at(p, 4 * KiB));
  a.deallocate(q);
  a.empty_cache();
  CHECK(src.raw_frees == 0);

  src.set_busy(kB, false);  // one of two events done: still held
  void* r = a.allocate(4 * KiB, kA);
  CHECK(r != p);
  CHECK(src.live_events() == 1);
  a.deallocate(r);
  src.set_busy(kC, false);
  r = a.allocate(4 * KiB, kA);  // both done: p is back and merged
  CHECK(r == p);
  CHECK(src.live_events() == 0);
  CHECK(a.stats().pending_bytes == 0);
  a.deallocate(r);
  CHECK(is_whole_and_free(segment_of(a, p)));
  a.empty_cache();
  CHECK(src.raw_frees == 1);

  // An event recorded on an idle stream is done at once; empty_cache sees it.
  p = a.allocate(4 * KiB, kA);
  a.record_stream(p, kB);
  a.deallocate(p);
  CHECK(a.stats().pending_bytes == 4 * KiB);
  a.empty_cache();
  CHECK(a.stats().pending_bytes == 0);
  CHECK(src.used() == 0);
  CHECK(src.live_events() == 0);
}

TEST_CASE("caching allocator: statistics") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  void* p1 = a.allocate(1000);
  void* p2 = a.allocate(1000);
  auto st = a.stats();
  CHECK(st.total_allocations == 2);
  CHECK(st.cache_misses == 1);
  CHECK(st.cache_hits == 1);
  CHECK(st.total_allocated == 2048);
  CHECK(st.peak_allocated == 2048);
  CHECK(st.reserved_bytes == 2 * MiB);
  CHECK(st.peak_reserved_bytes == 2 * MiB);
  CHECK(st.segments == 1);
  CHECK(st.cached_bytes == 2 * MiB - 2048);
  a.deallocate(p1);
  st = a.stats();
  CHECK(st.total_allocated == 1024);
  CHECK(st.peak_allocated == 2048);
  CHECK(st.total_deallocations == 1);
  CHECK(st.cached_bytes == 2 * MiB - 1024);

  a.reset_stats();
  st = a.stats();
  CHECK(st.total_allocations == 0);
  CHECK(st.total_deallocations == 0);
  CHECK(st.cache_hits == 0);
  CHECK(st.cache_misses == 0);
  CHECK(st.oom_retries == 0);
  CHECK(st.total_allocated == 1024);
  CHECK(st.peak_allocated == 1024);
  CHECK(st.reserved_bytes == 2 * MiB);
  CHECK(st.peak_reserved_bytes == 2 * MiB);
  CHECK(st.segments == 1);

  void* big = a.allocate(5 * MiB);
  st = a.stats();
  CHECK(st.cache_misses == 1);
  CHECK(st.reserved_bytes == 22 * MiB);
  CHECK(st.peak_reserved_bytes == 22 * MiB);
  CHECK(st.peak_allocated == 1024 + 5 * MiB);
  a.deallocate(big);
  a.deallocate(p2);
  a.empty_cache();
  st = a.stats();
  CHECK(st.total_allocated == 0);
  CHECK(st.reserved_bytes == 0);
  CHECK(st.cached_bytes == 0);
  CHECK(st.segments == 0);
  CHECK(st.peak_reserved_bytes == 22 * MiB);
  CHECK(st.total_allocations == 1);
  CHECK(st.total_deallocations == 2);
}

TEST_CASE("caching allocator: out of memory empties the cache and retries") {
  FakeSource src(40 * MiB);
  CachingAllocator a(src, pooled());
  void* p = a.allocate(5 * MiB);  // a 20 MiB segment
  a.deallocate(p);
  void* q = a.allocate(30 * MiB);  // 20 + 30 > 40: the cached segment goes first
  CHECK(q != nullptr);
  auto st = a.stats();
  CHECK(st.oom_retries == 1);
  CHECK(src.raw_frees == 1);
  CHECK(st.reserved_bytes == 30 * MiB);
  CHECK(st.segments == 1);
  a.deallocate(q);
}

TEST_CASE("caching allocator: out of memory raises ROCmMemoryError and stays usable") {
  FakeSource src(40 * MiB);
  CachingAllocator a(src, pooled());
  void* small = a.allocate(KiB);  // 2 MiB small segment, stays
  void* q = a.allocate(30 * MiB);
  void* cached = a.allocate(MiB);  // second small block, then freed: cached
  a.deallocate(cached);
  std::string msg;
  try {
    a.allocate(30 * MiB + 1);
    FAIL("no exception");
  } catch (const ROCmMemoryError& e) {
    msg = e.what();
  }
  MESSAGE(msg);
  CHECK(msg.find("fake:0") != std::string::npos);
  CHECK(msg.find("out of memory") != std::string::npos);
  CHECK(msg.find("31457281 bytes") != std::string::npos);  // requested
  CHECK(msg.find("31457792") != std::string::npos);        // rounded
  CHECK(msg.find("8.00 MiB") != std::string::npos);        // free on the device
  CHECK(msg.find("40.00 MiB") != std::string::npos);       // total
  CHECK(msg.find("32.00 MiB") != std::string::npos);       // reserved by the allocator
  CHECK(msg.find("cached") != std::string::npos);
  CHECK(msg.find("pf.backend.rocm.get_memory_manager().clear_pool()") != std::string::npos);
  CHECK_THROWS_AS(a.allocate(SIZE_MAX), ROCmMemoryError);
  CHECK_THROWS_AS(a.allocate(SIZE_MAX / 2), ROCmMemoryError);

  auto st = a.stats();
  CHECK(st.oom_retries == 1);  // the huge requests fail before asking the source
  CHECK(st.total_allocations == 3);
  CHECK(st.total_allocated == KiB + 30 * MiB);
  CHECK(st.reserved_bytes == 32 * MiB);
  CHECK(st.reserved_bytes == src.used());

  // Still works: cached and new memory.
  void* c = a.allocate(MiB);
  CHECK(c == at(small, KiB));
  a.deallocate(q);
  void* r = a.allocate(30 * MiB);
  CHECK(r == q);
  a.deallocate(r);
  a.deallocate(c);
  a.deallocate(small);
  a.empty_cache();
  CHECK(src.used() == 0);
  CHECK(a.stats().total_allocated == 0);
}

TEST_CASE("caching allocator: without pooling every call goes to the source") {
  FakeSource src;
  CachingAllocator a(src, {false, SIZE_MAX});
  CHECK_FALSE(a.config().enable_pooling);
  void* p = a.allocate(1000);
  void* q = a.allocate(3 * MiB);
  CHECK(src.raw_allocs == 2);
  CHECK(src.raw_size(p) == 1024);
  CHECK(src.raw_size(q) == 3 * MiB);
  CHECK(a.block_size(p) == 1024);
  CHECK(a.stats().reserved_bytes == 1024 + 3 * MiB);
  a.deallocate(p);
  CHECK(src.raw_frees == 1);
  void* r = a.allocate(1000);
  CHECK(src.raw_allocs == 3);
  auto st = a.stats();
  CHECK(st.cache_hits == 0);
  CHECK(st.cache_misses == 3);
  // A block used on another stream still waits for it.
  src.set_busy(kB, true);
  a.record_stream(r, kB);
  a.deallocate(r);
  a.deallocate(q);
  CHECK(src.raw_frees == 2);
  src.set_busy(kB, false);
  a.empty_cache();
  CHECK(src.raw_frees == 3);
  CHECK(src.used() == 0);
  CHECK(a.stats().reserved_bytes == 0);
  CHECK(a.stats().segments == 0);
}

TEST_CASE("caching allocator: max_cached_bytes bounds the cache") {
  SUBCASE("zero: a fully free segment goes back at once") {
    FakeSource src;
    CachingAllocator a(src, {true, 0});
    void* p = a.allocate(KiB);
    void* q = a.allocate(KiB);
    a.deallocate(p);
    CHECK(src.raw_frees == 0);  // the segment is still in use
    a.deallocate(q);
    CHECK(src.raw_frees == 1);
    CHECK(a.stats().reserved_bytes == 0);
  }
  SUBCASE("2 MiB: segments are released until the cache fits") {
    FakeSource src;
    CachingAllocator a(src, {true, 2 * MiB});
    void* p1 = a.allocate(MiB);
    void* p2 = a.allocate(MiB);
    void* p3 = a.allocate(MiB);  // second segment
    CHECK(src.raw_allocs == 2);
    a.deallocate(p1);
    a.deallocate(p2);  // 3 MiB cached: the first segment goes
    CHECK(src.raw_frees == 1);
    a.deallocate(p3);  // 2 MiB cached: kept
    CHECK(src.raw_frees == 1);
    auto st = a.stats();
    CHECK(st.reserved_bytes == 2 * MiB);
    CHECK(st.cached_bytes == 2 * MiB);
  }
}

TEST_CASE("caching allocator: unknown pointers are rejected") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  int local = 0;
  CHECK_THROWS_AS(a.deallocate(&local), std::invalid_argument);
  CHECK_THROWS_AS(a.deallocate(&local), ValueError);
  void* p = a.allocate(4 * KiB);
  CHECK_THROWS_AS(a.deallocate(at(p, 512)), std::invalid_argument);  // inside a block
  CHECK_THROWS_AS(a.block_size(&local), std::invalid_argument);
  CHECK_THROWS_AS(a.record_stream(&local, kB), std::invalid_argument);
  a.deallocate(p);
  CHECK_THROWS_AS(a.deallocate(p), std::invalid_argument);  // double free
  auto st = a.stats();
  CHECK(st.total_deallocations == 1);
  CHECK(st.total_allocated == 0);
}

TEST_CASE("caching allocator: destruction returns everything to the source") {
  FakeSource src;
  {
    CachingAllocator a(src, pooled());
    a.allocate(KiB);
    a.allocate(30 * MiB);
    void* p = a.allocate(3 * MiB);
    a.deallocate(a.allocate(5 * KiB));
    src.set_busy(kB, true);
    a.record_stream(p, kB);
    a.deallocate(p);
    CHECK(src.live_events() == 1);
  }
  CHECK(src.used() == 0);
  CHECK(src.live_events() == 0);
  CHECK(src.raw_allocs == src.raw_frees);
  CHECK(src.bad_frees == 0);
}

uint64_t pool_of(const CachingAllocator& a, void* p) { return segment_of(a, p).pool; }

TEST_CASE("private pool: a stream's allocations come from segments of its own") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  void* general = a.allocate(4 * KiB, kA);  // a general segment with room to spare
  CHECK(src.raw_allocs == 1);
  auto id = a.begin_pool(kB);
  CHECK(id != 0);
  void* p = a.allocate(4 * KiB, kB);
  CHECK(src.raw_allocs == 2);  // not the general segment's free rest
  auto seg = segment_of(a, p);
  CHECK(seg.pool == id);
  CHECK(seg.address != segment_of(a, general).address);
  void* q = a.allocate(8 * KiB, kB);  // the pool's own segment is split for the pool
  CHECK(q == at(p, 4 * KiB));
  void* big = a.allocate(3 * MiB, kB);  // and large requests get large pool segments
  CHECK(pool_of(a, big) == id);
  CHECK_FALSE(segment_of(a, big).small_pool);
  CHECK(src.raw_allocs == 3);

  // Other streams never get pool memory, though the pool's segments have free room.
  void* other = a.allocate(4 * KiB, kA);
  CHECK(other == at(general, 4 * KiB));
  void* c = a.allocate(3 * MiB, kC);
  CHECK(pool_of(a, c) == 0);
  CHECK(src.raw_allocs == 4);

  auto st = a.stats();
  CHECK(st.pools == 1);
  CHECK(st.pool_reserved_bytes == 2 * MiB + 20 * MiB);
  CHECK(st.reserved_bytes == 2 * (2 * MiB + 20 * MiB));
  a.end_pool(kB);
  for (void* x : {general, p, q, big, other, c}) a.deallocate(x);
  a.release_pool(id);
  a.empty_cache();
  CHECK(src.used() == 0);
}

TEST_CASE("private pool: a block freed while routed is reused within the pool only") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  auto id = a.begin_pool(kB);
  void* p = a.allocate(64 * KiB, kB);
  a.deallocate(p);
  CHECK(a.allocate(64 * KiB, kB) == p);  // the capture's later kernels may reuse it
  a.deallocate(p);
  CHECK(pool_of(a, p) == id);
  void* c = a.allocate(64 * KiB, kC);  // C is idle, yet p's block is the pool's
  CHECK(pool_of(a, c) == 0);
  a.end_pool(kB);
  void* b = a.allocate(64 * KiB, kB);  // B allocates from the general cache again
  CHECK(pool_of(a, b) == 0);
  CHECK(b != p);
  a.empty_cache();
  CHECK(a.stats().pool_reserved_bytes == 2 * MiB);  // empty_cache leaves the pool alone
  // A block of the pool freed after the capture (a graph output) goes back to the pool.
  CHECK(a.begin_pool(kB, id) == id);
  void* out = a.allocate(64 * KiB, kB);
  CHECK(out == p);
  a.end_pool(kB);
  a.deallocate(out);
  void* d = a.allocate(64 * KiB, kB);
  CHECK(d != out);
  CHECK(pool_of(a, d) == 0);
  for (void* x : {c, b, d}) a.deallocate(x);
  a.release_pool(id);
  a.empty_cache();
  CHECK(src.used() == 0);
}

TEST_CASE("private pool: release gives the memory to the general cache") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  auto id = a.begin_pool(kB);
  void* held = a.allocate(KiB, kB);   // a graph output, still held at release
  void* freed = a.allocate(KiB, kB);  // a temporary of the capture
  void* large = a.allocate(5 * MiB, kB);
  a.deallocate(freed);
  a.deallocate(large);
  a.end_pool(kB);
  CHECK(a.pool_streams(id) == std::vector<Stream>{kB});
  a.empty_cache();
  CHECK(src.raw_frees == 0);
  CHECK(a.stats().cached_bytes == 2 * MiB - KiB + 20 * MiB);

  a.release_pool(id);
  auto st = a.stats();
  CHECK(st.pools == 0);
  CHECK(st.pool_reserved_bytes == 0);
  CHECK(st.reserved_bytes == 22 * MiB);
  CHECK(pool_of(a, held) == 0);
  CHECK(is_whole_and_free(segment_of(a, large)));
  // Its free blocks are the general cache's, of the stream that allocated them.
  CHECK(a.allocate(KiB, kB) == freed);
  CHECK(a.allocate(5 * MiB, kB) == large);
  a.deallocate(freed);
  a.deallocate(large);
  a.empty_cache();  // the large segment is fully free: returned; the small one holds `held`
  CHECK(src.raw_frees == 1);
  a.deallocate(held);  // a block still held at release is the general cache's when freed
  CHECK(is_whole_and_free(segment_of(a, held)));
  a.empty_cache();
  CHECK(src.used() == 0);
  CHECK_THROWS_AS(a.release_pool(id), ValueError);
  CHECK_THROWS_AS(a.begin_pool(kB, id), ValueError);
}

TEST_CASE("private pool: pools are shared on request and kept apart otherwise") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  auto first = a.begin_pool(kB);
  void* x = a.allocate(KiB, kB);
  a.deallocate(x);
  a.end_pool(kB);
  auto second = a.begin_pool(kB);  // a new pool: none of the first one's memory
  CHECK(second != first);
  void* y = a.allocate(KiB, kB);
  CHECK(pool_of(a, y) == second);
  a.deallocate(y);
  a.end_pool(kB);
  CHECK(a.begin_pool(kB, first) == first);  // a later graph shares the first pool
  CHECK(a.allocate(KiB, kB) == x);
  a.deallocate(x);
  CHECK(a.begin_pool(kC, first) == first);  // two streams of one capture
  void* z = a.allocate(KiB, kC);  // B's free block is not C's to take during a capture
  CHECK(pool_of(a, z) == first);
  CHECK(z != x);
  CHECK(a.stats().pools == 2);
  CHECK(a.pool_streams(first) == std::vector<Stream>{kB, kC});
  CHECK(a.pool_streams(second) == std::vector<Stream>{kB});
  a.deallocate(z);
  a.end_pool(kB);
  a.end_pool(kC);
  a.release_pool(first);
  a.release_pool(second);
  a.empty_cache();
  CHECK(src.used() == 0);
  CHECK(a.stats().pools == 0);
}

TEST_CASE("private pool: misuse is a ValueError and changes nothing") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  CHECK_THROWS_AS(a.end_pool(kB), ValueError);
  CHECK_THROWS_AS(a.release_pool(1), ValueError);
  CHECK_THROWS_AS(a.begin_pool(kB, 7), ValueError);
  CHECK_THROWS_AS(a.pool_streams(7), ValueError);
  auto id = a.begin_pool(kB);
  CHECK_THROWS_AS(a.begin_pool(kB), ValueError);      // one pool per stream at a time
  CHECK_THROWS_AS(a.begin_pool(kB, id), ValueError);
  CHECK_THROWS_AS(a.release_pool(id), ValueError);    // still routed
  CHECK(a.stats().pools == 1);
  void* p = a.allocate(KiB, kB);
  CHECK(pool_of(a, p) == id);
  a.end_pool(kB);
  CHECK_THROWS_AS(a.end_pool(kB), ValueError);
  a.deallocate(p);
  a.release_pool(id);
  a.empty_cache();
  CHECK(src.used() == 0);
}

TEST_CASE("private pool: while one is active nothing is queried, recorded or freed") {
  FakeSource src(64 * MiB);
  CachingAllocator a(src, pooled());
  void* general = a.allocate(KiB, kA);
  void* used_elsewhere = a.allocate(KiB, kA);
  void* spare = a.allocate(KiB, kA);
  a.deallocate(spare);
  void* gone = a.allocate(12 * MiB, kA);
  a.deallocate(gone);  // a fully free segment that empty_cache would return
  auto id = a.begin_pool(kB);
  size_t stream_queries = src.stream_queries, event_queries = src.event_queries, events = src.events_recorded;

  a.record_stream(used_elsewhere, kC);
  a.deallocate(used_elsewhere);  // its event waits until no pool is active
  CHECK(src.events_recorded == events);
  CHECK(a.stats().pending_bytes == KiB);
  CHECK(segment_of(a, general).blocks[1].pending);
  void* d = a.allocate(KiB, kD);  // A is idle, but no stream is asked: D gets new memory
  CHECK(segment_of(a, d).address != segment_of(a, general).address);
  a.empty_cache();  // returns nothing during a capture
  CHECK(src.raw_frees == 0);
  void* p = a.allocate(KiB, kB);
  // 46 MiB are free, 58 MiB once the cache is emptied: the request fails at once.
  CHECK_THROWS_AS(a.allocate(50 * MiB, kB), ROCmMemoryError);
  CHECK_THROWS_AS(a.allocate(50 * MiB, kA), ROCmMemoryError);
  CHECK(a.stats().oom_retries == 0);
  a.deallocate(p);
  a.deallocate(d);
  CHECK(src.stream_queries == stream_queries);
  CHECK(src.event_queries == event_queries);
  CHECK(src.events_recorded == events);
  CHECK(src.raw_frees == 0);

  a.end_pool(kB);
  void* e = a.allocate(KiB, kA);  // no pool active: the deferred event is recorded (C is idle: done)
  CHECK(src.events_recorded == events + 1);
  CHECK(a.stats().pending_bytes == 0);
  CHECK(e == used_elsewhere);
  a.deallocate(e);
  a.deallocate(general);
  a.release_pool(id);
  a.empty_cache();
  CHECK(src.used() == 0);
  CHECK(src.live_events() == 0);
}

TEST_CASE("private pool: without pooling a pool still keeps its memory until released") {
  FakeSource src;
  CachingAllocator a(src, {false, SIZE_MAX});
  auto id = a.begin_pool(kB);
  void* p = a.allocate(1000, kB);
  CHECK(src.raw_size(p) == 1024);
  a.deallocate(p);
  CHECK(src.raw_frees == 0);
  CHECK(a.allocate(1000, kB) == p);
  void* g = a.allocate(1000, kA);
  a.deallocate(g);  // a general block freed during a capture: kept until the capture ends
  CHECK(src.raw_frees == 0);
  a.end_pool(kB);
  CHECK(src.raw_frees == 1);
  a.deallocate(p);
  CHECK(src.raw_frees == 1);
  a.release_pool(id);
  CHECK(src.raw_frees == 2);
  CHECK(src.used() == 0);
  CHECK(a.stats().reserved_bytes == 0);
}

TEST_CASE("private pool: destruction returns the pools' memory too") {
  FakeSource src;
  {
    CachingAllocator a(src, pooled());
    auto id = a.begin_pool(kB);
    a.allocate(KiB, kB);
    void* p = a.allocate(2 * MiB, kB);
    a.record_stream(p, kC);
    a.deallocate(p);  // deferred
    (void)id;
  }
  CHECK(src.used() == 0);
  CHECK(src.live_events() == 0);
  CHECK(src.raw_allocs == src.raw_frees);
  CHECK(src.bad_frees == 0);
}

TEST_CASE("private pool: random use never mixes pool and general memory") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  std::mt19937 rng(99);
  std::vector<void*> live;
  std::vector<CachingAllocator::PoolId> released_later;
  CachingAllocator::PoolId active = 0;
  int checked = 0;
  for (int op = 0; op < 20000; ++op) {
    int r = static_cast<int>(rng() % 100);
    if (r < 2) {  // start or stop a capture on B, sometimes sharing the last pool
      if (active) {
        a.end_pool(kB);
        released_later.push_back(active);
        active = 0;
      } else {
        bool share = !released_later.empty() && rng() % 2;
        active = a.begin_pool(kB, share ? released_later.back() : 0);
        if (share) released_later.pop_back();
      }
    } else if (r < 3 && !released_later.empty()) {
      a.release_pool(released_later.front());
      released_later.erase(released_later.begin());
    } else if (r < 55 || live.empty()) {
      Stream s = rng() % 2 ? kA : kB;
      size_t n = rng() % 8 == 0 ? MiB + rng() % (4 * MiB) : 1 + rng() % (64 * KiB);
      void* p = a.allocate(n, s);
      uint64_t pool = pool_of(a, p);
      uint64_t want = (s == kB) ? active : 0;
      CHECK(pool == want);
      ++checked;
      live.push_back(p);
      if (rng() % 8 == 0) a.record_stream(p, kC);
    } else {
      size_t i = rng() % live.size();
      a.deallocate(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
  }
  if (active) a.end_pool(kB);
  for (void* p : live) a.deallocate(p);
  for (auto id : released_later) a.release_pool(id);
  if (active) a.release_pool(active);
  auto st = a.stats();
  CHECK(st.pools == 0);
  CHECK(st.pool_reserved_bytes == 0);
  CHECK(st.total_allocated == 0);
  a.empty_cache();
  CHECK(src.used() == 0);
  CHECK(src.live_events() == 0);
  MESSAGE("random pools: " << checked << " allocations checked");
}

TEST_CASE("caching allocator: concurrent allocation and deallocation") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  constexpr int kThreads = 4, kOps = 20000;
  std::atomic<int> corrupted{0};
  auto work = [&](int t) {
    std::mt19937_64 rng(1234 + t);
    struct Live { void* p; size_t n; uint64_t tag; };
    std::vector<Live> live;
    uint64_t counter = 0;
    auto check_free = [&](size_t i) {
      Live l = live[i];
      uint64_t head, tail;
      std::memcpy(&head, l.p, 8);
      std::memcpy(&tail, at(l.p, l.n - 8), 8);
      if (head != l.tag || tail != l.tag) ++corrupted;
      if (rng() % 16 == 0) a.record_stream(l.p, rng() % 2 ? kA : kB);
      a.deallocate(l.p);
      live[i] = live.back();
      live.pop_back();
    };
    for (int op = 0; op < kOps; ++op) {
      if (!live.empty() && (live.size() >= 48 || rng() % 2)) {
        check_free(rng() % live.size());
        continue;
      }
      size_t kind = rng() % 100, n;
      if (kind < 70) n = 16 + rng() % (64 * KiB);
      else if (kind < 90) n = 64 * KiB + rng() % (MiB + 64 * KiB);  // around the small/large border
      else if (kind < 98) n = MiB + rng() % (8 * MiB);
      else n = 10 * MiB + rng() % (14 * MiB);
      void* p = a.allocate(n, rng() % 2 ? kA : kB);
      uint64_t tag = (uint64_t(t) << 32) | ++counter;
      std::memcpy(p, &tag, 8);
      std::memcpy(at(p, n - 8), &tag, 8);
      live.push_back({p, n, tag});
      if (op % 5000 == 0 && t == 0) a.empty_cache();
      if (op % 1000 == 0) (void)a.stats();
    }
    while (!live.empty()) check_free(live.size() - 1);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& th : threads) th.join();
  CHECK(corrupted == 0);
  auto st = a.stats();
  CHECK(st.total_allocated == 0);
  CHECK(st.total_allocations == st.total_deallocations);
  CHECK(st.total_allocations == st.cache_hits + st.cache_misses);
  CHECK(st.reserved_bytes == src.used());
  MESSAGE("stress: " << st.total_allocations << " allocations, " << st.cache_hits << " hits, "
                     << st.cache_misses << " misses, peak reserved " << st.peak_reserved_bytes / MiB << " MiB");
  a.empty_cache();
  CHECK(src.used() == 0);
  CHECK(src.raw_allocs == src.raw_frees);
  CHECK(src.live_events() == 0);
  CHECK(src.bad_frees == 0);
  CHECK(a.stats().reserved_bytes == 0);
}

TEST_CASE("caching allocator: time of a cached 1 MiB allocate + deallocate (information only)") {
  FakeSource src;
  CachingAllocator a(src, pooled());
  a.deallocate(a.allocate(MiB));
  constexpr int kBatches = 101, kPairs = 2000;
  std::vector<double> ns;
  for (int b = 0; b < kBatches; ++b) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kPairs; ++i) a.deallocate(a.allocate(MiB));
    auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kPairs);
  }
  std::nth_element(ns.begin(), ns.begin() + kBatches / 2, ns.end());
  MESSAGE("cached 1 MiB allocate+deallocate: median " << ns[kBatches / 2] << " ns per pair");
  CHECK(src.raw_allocs == 1);
}
