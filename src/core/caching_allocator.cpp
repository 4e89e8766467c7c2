#include "pyflame/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <unordered_map>
#include <utility>

#include "pyflame/error.h"

namespace pyflame {

namespace {

using Stream = DeviceMemorySource::Stream;
using Event = DeviceMemorySource::Event;
using PoolId = CachingAllocator::PoolId;

// Requests above this cannot be rounded without overflow; they fail as out of memory.
constexpr size_t kMaxRequest = SIZE_MAX / 4;

// Free lists of fixed-size nodes for the bookkeeping containers, so that the
// cached path does not go to malloc for every set or map node. Guarded by the
// allocator's mutex like the containers themselves.
class NodeArena {
 public:
  NodeArena() = default;
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;
  ~NodeArena() {
    for (int i = 0; i < n_; ++i)
      for (FreeNode* p = lists_[i].head; p;) {
        FreeNode* next = p->next;
        ::operator delete(p);
        p = next;
      }
  }
  void* get(size_t size) {
    if (List* l = find(size); l && l->head) {
      FreeNode* p = l->head;
      l->head = p->next;
      return p;
    }
    return ::operator new(std::max(size, sizeof(FreeNode)));
  }
  void put(void* p, size_t size) {
    List* l = find(size);
    if (!l && n_ < kLists) l = &(lists_[n_++] = List{size, nullptr});
    if (!l) return ::operator delete(p);
    auto* node = static_cast<FreeNode*>(p);
    node->next = l->head;
    l->head = node;
  }

 private:
  struct FreeNode { FreeNode* next; };
  struct List { size_t size; FreeNode* head; };
  static constexpr int kLists = 4;
  List* find(size_t size) {
    for (int i = 0; i < n_; ++i)
      if (lists_[i].size == size) return &lists_[i];
    return nullptr;
  }
  List lists_[kLists] = {};
  int n_ = 0;
};

template <class T>
struct Recycler {
  using value_type = T;
  NodeArena* arena;
  explicit Recycler(NodeArena* a) : arena(a) {}
  template <class U> Recycler(const Recycler<U>& o) : arena(o.arena) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));
    if (n == 1) return static_cast<T*>(arena->get(sizeof(T)));
    return std::allocator<T>().allocate(n);  // bucket arrays: rare, not recycled
  }
  void deallocate(T* p, size_t n) {
    if (n == 1) arena->put(p, sizeof(T));
    else std::allocator<T>().deallocate(p, n);
  }
  template <class U> bool operator==(const Recycler<U>& o) const { return arena == o.arena; }
};

struct Segment;
struct PrivatePool;

// A piece of a segment: handed out, pending (deallocated, waiting for events)
// or free (in its pool's set). Blocks tile their segment; prev/next link
// neighbours in address order.
struct Block {
  char* ptr = nullptr;
  size_t size = 0;
  Stream stream = nullptr;  // the pool (stream) it belongs to
  Segment* segment = nullptr;
  Block* prev = nullptr;
  Block* next = nullptr;
  bool allocated = false;        // handed out or pending; false: in the free set
  int pending_events = 0;
  std::vector<Stream> stream_uses;  // record_stream()ed streams; capacity kept across reuse
};

struct Segment {
  char* base = nullptr;
  size_t size = 0;
  bool small = false;
  PrivatePool* pool = nullptr;  // nullptr: the general cache
  size_t used = 0;  // bytes of blocks handed out or pending
  Block* first = nullptr;
  Segment* prev = nullptr;  // all segments
  Segment* next = nullptr;
  Segment* idle_prev = nullptr;  // fully free segments (used == 0)
  Segment* idle_next = nullptr;
  bool in_idle_list = false;  // only segments of the general cache are ever in it
};

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    auto sa = reinterpret_cast<uintptr_t>(a->stream), sb = reinterpret_cast<uintptr_t>(b->stream);
    if (sa != sb) return sa < sb;
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};

struct PtrHash {
  size_t operator()(const void* p) const {
    auto v = reinterpret_cast<uintptr_t>(p) >> 9;  // blocks are 512-aligned within a segment
    return static_cast<size_t>(v ^ (v >> 17));
  }
};

using FreeSet = std::set<Block*, BlockLess, Recycler<Block*>>;
using BlockMap = std::unordered_map<void*, Block*, PtrHash, std::equal_to<void*>,
                                    Recycler<std::pair<void* const, Block*>>>;

// The free blocks of a private pool's segments, and the streams that allocate from it.
struct PrivatePool {
  PoolId id;
  FreeSet small_free, large_free;
  std::vector<Stream> streams;  // every stream ever routed to it
  int routed = 0;               // streams routed to it now
  PrivatePool(PoolId i, NodeArena* arena)
      : id(i), small_free(BlockLess{}, Recycler<Block*>(arena)), large_free(BlockLess{}, Recycler<Block*>(arena)) {}
};

std::string format_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%zu B", bytes);
  else std::snprintf(buf, sizeof buf, "%.2f %s (%zu bytes)", v, units[u], bytes);
  return buf;
}

}  // namespace

struct CachingAllocator::Impl {
  DeviceMemorySource& source;
  const Config config;
  mutable std::mutex mutex;
  NodeArena arena;  // before the containers: they give their nodes back to it
  FreeSet small_free{BlockLess{}, Recycler<Block*>(&arena)};
  FreeSet large_free{BlockLess{}, Recycler<Block*>(&arena)};
  BlockMap allocated{64, PtrHash{}, std::equal_to<void*>{}, Recycler<std::pair<void* const, Block*>>(&arena)};
  std::vector<std::pair<Event, Block*>> pending;  // one entry per outstanding event
  std::vector<Block*> deferred;  // freed with stream uses while a pool was active: no events recorded yet
  std::map<PoolId, std::unique_ptr<PrivatePool>> pools;
  std::vector<std::pair<Stream, PrivatePool*>> routes;  // streams whose allocations go to a pool
  PoolId next_pool_id = 1;
  Segment* segments = nullptr;
  Segment* idle_segments = nullptr;
  Block* spare_blocks = nullptr;  // recycled Block objects, linked through `next`
  AllocatorStats st;

  Impl(DeviceMemorySource& s, Config c) : source(s), config(c) {}

  ~Impl() {
    for (auto& [event, block] : pending) {
      try { source.release_event(event); } catch (...) {}
    }
    for (Segment* seg = segments; seg;) {
      Segment* next = seg->next;
      for (Block* b = seg->first; b;) {
        Block* n = b->next;
        delete b;
        b = n;
      }
      try { source.raw_free(seg->base); } catch (...) {}
      delete seg;
      seg = next;
    }
    for (Block* b = spare_blocks; b;) {
      Block* n = b->next;
      delete b;
      b = n;
    }
  }

  // The set a free block of `seg` belongs in.
  FreeSet& free_set(const Segment* seg) {
    if (seg->pool) return seg->small ? seg->pool->small_free : seg->pool->large_free;
    return seg->small ? small_free : large_free;
  }

  // While a pool is active a capture may be under way: see the header.
  bool pools_active() const { return !routes.empty(); }

  PrivatePool* route_of(Stream stream) const {
    for (auto& [s, pool] : routes)
      if (s == stream) return pool;
    return nullptr;
  }

  PrivatePool* find_pool(PoolId id, const char* what) const {
    auto it = pools.find(id);
    PF_CHECK(it != pools.end(), ValueError, "CachingAllocator(", source.describe(), ").", what, ": private pool ", id,
             " does not exist (or was released)");
    return it->second.get();
  }

  Block* new_block() {
    if (!spare_blocks) return new Block;
    Block* b = spare_blocks;
    spare_blocks = b->next;
    b->next = nullptr;
    return b;
  }
  void recycle(Block* b) {
    b->stream_uses.clear();
    b->prev = nullptr;
    b->allocated = false;
    b->pending_events = 0;
    b->segment = nullptr;
    b->next = spare_blocks;
    spare_blocks = b;
  }

  void idle_link(Segment* s) {
    if (s->in_idle_list) return;
    s->in_idle_list = true;
    s->idle_prev = nullptr;
    s->idle_next = idle_segments;
    if (idle_segments) idle_segments->idle_prev = s;
    idle_segments = s;
  }
  void idle_unlink(Segment* s) {
    if (!s->in_idle_list) return;
    s->in_idle_list = false;
    (s->idle_prev ? s->idle_prev->idle_next : idle_segments) = s->idle_next;
    if (s->idle_next) s->idle_next->idle_prev = s->idle_prev;
  }

  // A stream whose state cannot be read counts as busy: that is always safe.
  bool idle(Stream s) {
    if (pools_active()) return false;
    try {
      return source.stream_idle(s);
    } catch (...) {
      return false;
    }
  }

  // A free block of at least `size` for `stream`: its own pool first (best
  // fit), then the best fit among the pools of streams that are idle now.
  FreeSet::iterator find_free(FreeSet& pool, size_t size, Stream stream) {
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.lower_bound(&key);
    if (it != pool.end() && (*it)->stream == stream) return it;
    auto best = pool.end();
    for (auto s = pool.begin(); s != pool.end();) {
      Stream other = (*s)->stream;
      key.stream = other;
      if (other != stream) {
        key.size = size;
        auto c = pool.lower_bound(&key);
        if (c != pool.end() && (*c)->stream == other && (best == pool.end() || (*c)->size < (*best)->size) &&
            idle(other))
          best = c;
      }
      key.size = SIZE_MAX;
      key.ptr = reinterpret_cast<char*>(UINTPTR_MAX);
      s = pool.upper_bound(&key);  // the first block of the next stream
      key.ptr = nullptr;
    }
    return best;
  }

  // A new segment of `bytes` whose single block is not in any set yet; nullptr
  // when the source is out of memory.
  Block* new_segment(size_t bytes, bool small, Stream stream, PrivatePool* pool) {
    void* mem = source.raw_allocate(bytes);
    if (!mem) return nullptr;
    Segment* seg = nullptr;
    Block* b = nullptr;
    try {
      seg = new Segment;
      b = new_block();
    } catch (...) {
      delete seg;
      source.raw_free(mem);
      throw;
    }
    seg->base = static_cast<char*>(mem);
    seg->size = bytes;
    seg->small = small;
    seg->pool = pool;
    seg->first = b;
    seg->next = segments;
    if (segments) segments->prev = seg;
    segments = seg;
    b->ptr = seg->base;
    b->size = bytes;
    b->stream = stream;
    b->segment = seg;
    b->prev = b->next = nullptr;
    st.reserved_bytes += bytes;
    st.peak_reserved_bytes = std::max(st.peak_reserved_bytes, st.reserved_bytes);
    st.cached_bytes += bytes;
    if (pool) st.pool_reserved_bytes += bytes;
    ++st.segments;
    return b;
  }

  // Hands out `b` (out of its set already) for `size` bytes on `stream`,
  // splitting off the rest when it is big enough to be worth keeping.
  void take(Block* b, size_t size, Stream stream) {
    Segment* seg = b->segment;
    size_t rest = b->size - size;
    bool split = config.enable_pooling && (seg->small ? rest >= kMinBlockSize : rest > kSmallSize);
    if (split) {
      Block* r = new_block();
      r->ptr = b->ptr + size;
      r->size = rest;
      r->stream = stream;  // b was free and its stream idle (or it is ours): no work pending on r
      r->segment = seg;
      r->prev = b;
      r->next = b->next;
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = size;
      free_set(seg).insert(r);
    }
    b->stream = stream;
    b->allocated = true;
    if (seg->used == 0) idle_unlink(seg);
    seg->used += b->size;
    st.cached_bytes -= b->size;
  }

  // Can free neighbours x and y (streams sx, sy) become one block? Then `s`
  // is the merged block's stream: the one whose work may still be pending.
  bool mergeable(Stream sx, Stream sy, Stream* s) {
    if (sx == sy) return *s = sx, true;
    if (idle(sy)) return *s = sx, true;
    if (idle(sx)) return *s = sy, true;
    return false;
  }

  // Neighbours `left` and `right`, both free and out of the pool, become `left` (on stream `s`).
  Block* merge(Block* left, Block* right, Stream s) {
    left->size += right->size;
    left->next = right->next;
    if (right->next) right->next->prev = left;
    left->stream = s;
    recycle(right);
    return left;
  }

  // `b` is no longer used by anyone: back to its pool, merged with its free
  // neighbours, or straight back to the source without pooling.
  void free_block(Block* b) {
    Segment* seg = b->segment;
    seg->used -= b->size;
    st.cached_bytes += b->size;
    b->allocated = false;
    if (!config.enable_pooling && !seg->pool && !pools_active()) return release_segment(seg);
    FreeSet& pool = free_set(seg);
    Stream s;
    if (Block* p = b->prev; p && !p->allocated && mergeable(b->stream, p->stream, &s)) {
      pool.erase(p);
      b = merge(p, b, s);
    }
    if (Block* n = b->next; n && !n->allocated && mergeable(b->stream, n->stream, &s)) {
      pool.erase(n);
      b = merge(b, n, s);
    }
    pool.insert(b);
    if (seg->used == 0 && !seg->pool) idle_link(seg);
    trim();
  }

  // Gives fully free segments back while the cache is above its bound (all of
  // them without pooling: they were kept only while a pool was active).
  void trim() {
    if (pools_active()) return;
    while (idle_segments && (!config.enable_pooling || st.cached_bytes > config.max_cached_bytes))
      release_segment(idle_segments);
  }

  // Returns a segment of the general cache to the source; its blocks must all
  // be free (or it is the single, unpooled block being freed).
  void release_segment(Segment* seg) {
    FreeSet& pool = free_set(seg);
    for (Block* b = seg->first; b;) {
      Block* n = b->next;
      if (!b->allocated) pool.erase(b);  // by key: a no-op for the unpooled block, which is in no set
      recycle(b);
      b = n;
    }
    idle_unlink(seg);
    (seg->prev ? seg->prev->next : segments) = seg->next;
    if (seg->next) seg->next->prev = seg->prev;
    st.reserved_bytes -= seg->size;
    st.cached_bytes -= seg->size - seg->used;
    --st.segments;
    void* base = seg->base;
    delete seg;
    source.raw_free(base);
  }

  void process_events() {
    for (size_t i = 0; i < pending.size();) {
      auto [event, block] = pending[i];
      if (!source.event_done(event)) {
        ++i;
        continue;
      }
      pending[i] = pending.back();
      pending.pop_back();
      source.release_event(event);
      if (--block->pending_events == 0) {
        st.pending_bytes -= block->size;
        free_block(block);
      }
    }
  }

  // Records the events of `b`'s stream uses; the block is pending until they
  // complete. If the source fails, nothing has changed.
  void pend(Block* b) {
    size_t first = pending.size();
    try {
      pending.reserve(first + b->stream_uses.size());
      for (Stream s : b->stream_uses) pending.emplace_back(source.record_event(s), b);
    } catch (...) {
      for (size_t i = first; i < pending.size(); ++i) source.release_event(pending[i].first);
      pending.resize(first);
      throw;
    }
    b->pending_events = static_cast<int>(b->stream_uses.size());
    b->stream_uses.clear();
  }

  // What waited for the end of the pools' activity: deferred events, then completed ones.
  void catch_up() {
    while (!deferred.empty()) {
      pend(deferred.back());
      deferred.pop_back();
    }
    if (!pending.empty()) process_events();
  }

  size_t empty_cache() {
    if (pools_active()) return 0;
    catch_up();
    size_t released = 0;
    while (idle_segments) {
      released += idle_segments->size;
      release_segment(idle_segments);
    }
    return released;
  }

  [[noreturn]] void throw_oom(size_t bytes, size_t rounded, size_t seg_bytes, bool retried) {
    size_t free_bytes = 0, total_bytes = 0;
    std::string device_memory;
    try {
      source.memory_info(&free_bytes, &total_bytes);
      device_memory = "the device has " + format_bytes(free_bytes) + " free of " + format_bytes(total_bytes) + " total";
    } catch (...) {
      device_memory = "the device's free and total memory are unknown";
    }
    std::string request = "tried to allocate " + format_bytes(bytes);
    std::string pool_note;
    if (st.pool_reserved_bytes)
      pool_note = ", " + format_bytes(st.pool_reserved_bytes) + " of it held by private (graph) pools";
    if (pools_active()) pool_note += "; the cache cannot be emptied while a private pool is active (a graph capture)";
    if (rounded != bytes) request += ", " + std::to_string(rounded) + " bytes after rounding";
    if (seg_bytes != rounded) request += ", in a new segment of " + format_bytes(seg_bytes);
    throw ROCmMemoryError(detail::cat(
        source.describe(), ": out of memory: ", request, "; ", device_memory, "; this allocator reserves ",
        format_bytes(st.reserved_bytes), ", of which ", format_bytes(st.cached_bytes),
        retried ? " is cached in partly used segments" : " is cached", " and ", format_bytes(st.pending_bytes),
        " waits for work on other streams", retried ? " (the cache was emptied and the allocation retried)" : "",
        pool_note, ". Free tensors you no longer need (del them, drop references), call "
        "pf.backend.rocm.get_memory_manager().clear_pool(), or use smaller batches."));
  }

  void* allocate(size_t bytes, Stream stream) {
    PrivatePool* private_pool = nullptr;
    if (pools_active()) private_pool = route_of(stream);
    else if (!deferred.empty() || !pending.empty()) catch_up();
    if (bytes > kMaxRequest) throw_oom(bytes, bytes, bytes, false);
    size_t size = round_size(bytes);
    bool small = size <= kSmallSize;
    Block* b = nullptr;
    if (config.enable_pooling || private_pool) {
      FreeSet& pool = private_pool ? (small ? private_pool->small_free : private_pool->large_free)
                                   : (small ? small_free : large_free);
      if (auto it = find_free(pool, size, stream); it != pool.end()) {
        b = *it;
        pool.erase(it);
        ++st.cache_hits;
      }
    }
    if (!b) {
      size_t seg_bytes = config.enable_pooling ? segment_size(size) : size;
      b = new_segment(seg_bytes, small, stream, private_pool);
      if (!b) {
        if (pools_active()) throw_oom(bytes, size, seg_bytes, false);
        ++st.oom_retries;
        empty_cache();
        b = new_segment(seg_bytes, small, stream, private_pool);
        if (!b) throw_oom(bytes, size, seg_bytes, true);
      }
      ++st.cache_misses;
    }
    take(b, size, stream);
    try {
      allocated.emplace(b->ptr, b);
    } catch (...) {
      free_block(b);  // undo as a deallocation would
      throw;
    }
    st.total_allocated += b->size;
    st.peak_allocated = std::max(st.peak_allocated, st.total_allocated);
    ++st.total_allocations;
    return b->ptr;
  }

  void deallocate(void* ptr) {
    auto it = allocated.find(ptr);
    PF_CHECK(it != allocated.end(), ValueError, "CachingAllocator(", source.describe(),
             ").deallocate: pointer was not allocated by this allocator, or was already freed");
    Block* b = it->second;
    bool held = !b->stream_uses.empty();  // until the work queued on those streams completes
    if (held && !pools_active()) {
      pend(b);  // first: if the source fails, nothing has changed
    } else if (held) {
      deferred.push_back(b);
      b->pending_events = static_cast<int>(b->stream_uses.size());
    }
    allocated.erase(it);
    st.total_allocated -= b->size;
    ++st.total_deallocations;
    if (held) st.pending_bytes += b->size;
    else free_block(b);
  }

  PoolId begin_pool(Stream stream, PoolId id) {
    if (PrivatePool* routed = route_of(stream))
      throw ValueError(detail::cat("CachingAllocator(", source.describe(),
                                   ").begin_pool: the stream already allocates from private pool ", routed->id,
                                   "; end_pool it first"));
    routes.reserve(routes.size() + 1);
    PrivatePool* pool;
    if (id == 0) {
      auto fresh = std::make_unique<PrivatePool>(next_pool_id, &arena);
      fresh->streams.push_back(stream);
      pool = fresh.get();
      pools.emplace(fresh->id, std::move(fresh));
      ++next_pool_id;
      ++st.pools;
    } else {
      pool = find_pool(id, "begin_pool");
      if (std::find(pool->streams.begin(), pool->streams.end(), stream) == pool->streams.end())
        pool->streams.push_back(stream);
    }
    routes.emplace_back(stream, pool);
    ++pool->routed;
    return pool->id;
  }

  void end_pool(Stream stream) {
    auto it = std::find_if(routes.begin(), routes.end(), [&](const auto& r) { return r.first == stream; });
    PF_CHECK(it != routes.end(), ValueError, "CachingAllocator(", source.describe(),
             ").end_pool: the stream does not allocate from a private pool");
    --it->second->routed;
    routes.erase(it);
    trim();
  }

  void release_pool(PoolId id) {
    PrivatePool* pool = find_pool(id, "release_pool");
    PF_CHECK(pool->routed == 0, ValueError, "CachingAllocator(", source.describe(), ").release_pool: private pool ", id,
             " is still in use by ", pool->routed, " stream(s); end_pool them first");
    // Node handles move between the sets without allocating: nothing here can fail half way.
    while (!pool->small_free.empty()) small_free.insert(pool->small_free.extract(pool->small_free.begin()));
    while (!pool->large_free.empty()) large_free.insert(pool->large_free.extract(pool->large_free.begin()));
    for (Segment* seg = segments; seg; seg = seg->next) {
      if (seg->pool != pool) continue;
      seg->pool = nullptr;
      st.pool_reserved_bytes -= seg->size;
      if (seg->used == 0) idle_link(seg);
    }
    pools.erase(id);
    --st.pools;
    trim();
  }

  Block* lookup(void* ptr, const char* what) const {
    auto it = allocated.find(ptr);
    PF_CHECK(it != allocated.end(), ValueError, "CachingAllocator(", source.describe(), ").", what,
             ": pointer was not allocated by this allocator, or was already freed");
    return it->second;
  }
};

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return (rounded + kLargeRound - 1) / kLargeRound * kLargeRound;
}

CachingAllocator::CachingAllocator(DeviceMemorySource& source, Config config)
    : config_(config), impl_(std::make_unique<Impl>(source, config)) {}

CachingAllocator::~CachingAllocator() = default;

void* CachingAllocator::allocate(size_t bytes, DeviceMemorySource::Stream stream) {
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->allocate(bytes, stream);
}

void CachingAllocator::deallocate(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->deallocate(ptr);
}

void CachingAllocator::record_stream(void* ptr, DeviceMemorySource::Stream stream) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Block* b = impl_->lookup(ptr, "record_stream");
  if (stream == b->stream) return;  // its own pool's stream orders its uses already
  if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end())
    b->stream_uses.push_back(stream);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->empty_cache();
}

CachingAllocator::PoolId CachingAllocator::begin_pool(DeviceMemorySource::Stream stream, PoolId pool) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->begin_pool(stream, pool);
}

void CachingAllocator::end_pool(DeviceMemorySource::Stream stream) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->end_pool(stream);
}

std::vector<DeviceMemorySource::Stream> CachingAllocator::pool_streams(PoolId pool) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->find_pool(pool, "pool_streams")->streams;
}

void CachingAllocator::release_pool(PoolId pool) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->release_pool(pool);
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->st;
}

void CachingAllocator::reset_stats() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  AllocatorStats& s = impl_->st;
  s.total_allocations = s.total_deallocations = s.cache_hits = s.cache_misses = s.oom_retries = 0;
  s.peak_allocated = s.total_allocated;
  s.peak_reserved_bytes = s.reserved_bytes;
}

size_t CachingAllocator::block_size(void* ptr) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->lookup(ptr, "block_size")->size;
}

std::vector<MemorySegmentInfo> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<MemorySegmentInfo> out;
  for (Segment* seg = impl_->segments; seg; seg = seg->next) {
    MemorySegmentInfo info;
    info.address = reinterpret_cast<uintptr_t>(seg->base);
    info.size = seg->size;
    info.small_pool = seg->small;
    info.pool = seg->pool ? seg->pool->id : 0;
    for (Block* b = seg->first; b; b = b->next) {
      MemoryBlockInfo bi;
      bi.address = reinterpret_cast<uintptr_t>(b->ptr);
      bi.size = b->size;
      bi.pending = b->pending_events > 0;
      bi.allocated = b->allocated && !bi.pending;
      bi.stream = b->stream;
      info.blocks.push_back(bi);
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
  return out;
}

}  // namespace pyflame
