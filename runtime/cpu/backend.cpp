// Host-memory backend of libotcrt_cpu: the arena is anonymous memory mapped
// for it (zero pages, which the kernel gives only as they are touched) and
// all transfers are memcpy (the gradients' sums over the ranks are
// cpu/gradients.cpp's). Also defines otcrt_check_launch as the
// no-op and otcrt_stream as the NULL stream the ABI promises for the cpu
// target.
#include "src/backend.h"

#include "otcrt/abi.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace otcrt {
namespace {

class CpuBackend final : public Backend {
public:
  const char *name() const override { return "cpu"; }

  Status init() override { return Status::ok(); }

  /// Page-aligned zero memory: a mapping of its own, so that the pages a
  /// run never touches (a sampling run's gradients and moments) cost
  /// nothing.
  Status allocate(int64_t bytes, char **arena) override {
    size_t size = static_cast<size_t>(bytes > 0 ? bytes : 1);
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (lazy_ ? MAP_NORESERVE : 0),
                   -1, 0);
    if (p == MAP_FAILED)
      return Status::error("cannot allocate an arena of " +
                           std::to_string(bytes) + " bytes of host memory");
    *arena = static_cast<char *>(p);
    sizes_[*arena] = size;
    return Status::ok();
  }

  bool allocatesZeroed() const override { return true; }
  void allocateLazily(bool lazy) override { lazy_ = lazy; }

  void release(char *arena) override {
    auto it = sizes_.find(arena);
    if (it == sizes_.end())
      return;
    munmap(arena, it->second);
    sizes_.erase(it);
  }

  Status zero(char *arena, int64_t offset, int64_t bytes) override {
    std::memset(arena + offset, 0, static_cast<size_t>(bytes));
    return Status::ok();
  }

  Status upload(char *arena, int64_t offset, const void *src,
                int64_t bytes) override {
    std::memcpy(arena + offset, src, static_cast<size_t>(bytes));
    return Status::ok();
  }

  Status download(const char *arena, int64_t offset, void *dst,
                  int64_t bytes) override {
    std::memcpy(dst, arena + offset, static_cast<size_t>(bytes));
    return Status::ok();
  }

  Status copy(char *dst, const char *src, int64_t bytes) override {
    std::memmove(dst, src, static_cast<size_t>(bytes));
    return Status::ok();
  }

  Status downloadAsync(const char *src, void *dst, int64_t bytes) override {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return Status::ok();
  }

  Status synchronize() override { return Status::ok(); }

  int64_t memoryInUse() const override {
    std::FILE *f = std::fopen("/proc/self/statm", "r");
    if (!f)
      return -1;
    long long size = 0, resident = 0;
    int n = std::fscanf(f, "%lld %lld", &size, &resident);
    std::fclose(f);
    return n == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
  }

private:
  /// The mappings and their sizes.
  std::map<char *, size_t> sizes_;
  bool lazy_ = false;
};

} // namespace

Backend &defaultBackend() {
  static CpuBackend backend;
  return backend;
}

} // namespace otcrt

extern "C" void otcrt_check_launch(const char *, int) {}

extern "C" void *otcrt_stream(void) { return nullptr; }
