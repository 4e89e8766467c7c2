// The ROCm runtime on a real GPU: the caching allocator under concurrent use
// on two streams, transfers, streams and events. Skips (with the reason) when
// no GPU is usable. scripts/gpu_check.sh also runs this binary under
// compute-sanitizer's memcheck and racecheck.

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "pyflame/backend/rocm/device.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"

namespace rocm = pyflame::backend::rocm;

namespace {
bool gpu_or_skip() {
  if (rocm::is_available()) return true;
  MESSAGE("skipped: no usable GPU: " << rocm::unavailable_reason());
  return false;
}
}  // namespace

TEST_CASE("device info describes a real GPU") {
  if (!gpu_or_skip()) return;
  rocm::DeviceInfo info = rocm::get_device_info(0);
  CHECK(!info.name.empty());
  CHECK((info.architecture.rfind("sm_", 0) == 0 || info.architecture.rfind("gfx", 0) == 0));
  CHECK((info.warp_size == 32 || info.warp_size == 64));
  CHECK(info.total_memory > info.free_memory);
  CHECK(info.compute_units > 0);
  CHECK_THROWS_AS(rocm::get_device_info(rocm::get_device_count()), pyflame::DeviceError);
}

TEST_CASE("host -> device -> host round trips through pinned staging and direct copies") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  for (size_t bytes : {size_t{1000}, size_t{3} << 20, (size_t{17} << 20) + 5}) {  // below, at, past the staging chunking
    std::vector<unsigned char> src(bytes), back(bytes, 0xAB);
    std::mt19937 rng(static_cast<unsigned>(bytes));
    for (auto& b : src) b = static_cast<unsigned char>(rng());
    void* d = mm.allocate(bytes);
    void* d2 = mm.allocate(bytes);
    mm.memset(d2, 0x5A, bytes);  // poison the destination first
    mm.copy_host_to_device(d, src.data(), bytes);
    mm.copy_device_to_device(d2, d, bytes);
    mm.copy_device_to_host(back.data(), d2, bytes);
    CHECK(std::memcmp(src.data(), back.data(), bytes) == 0);
    mm.deallocate(d);
    mm.deallocate(d2);
  }
}

TEST_CASE("the caching allocator serves repeat requests from its cache") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  mm.deallocate(mm.allocate(1 << 20));
  mm.reset_stats();
  const size_t in_use = mm.get_stats().total_allocated;  // held by others (e.g. a BLAS workspace)
  for (int i = 0; i < 100; ++i) mm.deallocate(mm.allocate(1 << 20));
  rocm::MemoryStats s = mm.get_stats();
  CHECK(s.cache_hits == 100);
  CHECK(s.cache_misses == 0);
  CHECK(s.total_allocated == in_use);
}

TEST_CASE("out of memory raises ROCmMemoryError and leaves the manager usable") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  size_t free = 0, total = 0;
  mm.get_memory_info(&free, &total);
  CHECK_THROWS_AS(mm.allocate(total * 4), pyflame::ROCmMemoryError);
  void* p = mm.allocate(4096);
  CHECK(p != nullptr);
  mm.deallocate(p);
}

TEST_CASE("threads allocate and free on two streams; everything returns") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  rocm::Stream s1(0), s2(0);
  hipStream_t streams[2] = {s1.handle(), s2.handle()};
  size_t before = mm.get_stats().total_allocated;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<void*, hipStream_t>> live;
      for (int i = 0; i < 2000; ++i) {
        if (live.size() < 16 && (rng() % 3 != 0 || live.empty())) {
          size_t bytes = (rng() % 4 == 0) ? (size_t{1} << 20) + rng() % (size_t{8} << 20) : 1 + rng() % 65536;
          hipStream_t st = streams[rng() % 2];
          void* p = mm.allocate_async(bytes, st);
          // Real work on the block, so reuse before it finishes would be a race.
          mm.memset_async(p, t, bytes, st);
          live.emplace_back(p, st);
        } else {
          size_t k = rng() % live.size();
          // Half the frees happen after a use on the other stream.
          hipStream_t st = (rng() % 2) ? live[k].second : (live[k].second == streams[0] ? streams[1] : streams[0]);
          try {
            mm.deallocate_async(live[k].first, st);
          } catch (...) {
            failures++;
          }
          live.erase(live.begin() + static_cast<long>(k));
        }
      }
      for (auto& [p, st] : live) mm.deallocate_async(p, st);
    });
  }
  for (auto& th : threads) th.join();
  s1.synchronize();
  s2.synchronize();
  CHECK(failures == 0);
  CHECK(mm.get_stats().total_allocated == before);
  mm.clear_pool();
  if (before == 0) CHECK(mm.get_stats().reserved_bytes == 0);
}

TEST_CASE("streams order work and events time it") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  rocm::Stream stream(0, -1);
  const size_t bytes = size_t{64} << 20;
  void* a = mm.allocate_async(bytes, stream.handle());
  void* b = mm.allocate_async(bytes, stream.handle());
  rocm::Event start(true), end(true);
  start.record(stream.handle());
  mm.memset_async(a, 1, bytes, stream.handle());
  mm.copy_device_to_device_async(b, a, bytes, stream.handle());
  end.record(stream.handle());
  end.synchronize();
  CHECK(end.query());
  CHECK(stream.query());
  CHECK(start.elapsed_time(end) > 0.0f);
  std::vector<unsigned char> host(16);
  mm.copy_device_to_host(host.data(), static_cast<char*>(b) + bytes - 16, 16);
  for (unsigned char c : host) CHECK(c == 1);
  mm.deallocate_async(a, stream.handle());
  mm.deallocate_async(b, stream.handle());
  {
    rocm::StreamGuard guard(stream);
    CHECK(rocm::current_stream(0) == stream.handle());
  }
  CHECK(rocm::current_stream(0) == nullptr);
}

// Last in the file, so last to run: hands the caches back, so that
// compute-sanitizer's leak check sees only real leaks.
TEST_CASE("release cached device and pinned memory") {
  if (!gpu_or_skip()) return;
  rocm::get_memory_manager(0).clear_pool();
  rocm::get_pinned_pool().clear();
  CHECK(rocm::get_memory_manager(0).get_stats().reserved_bytes == 0);
}
