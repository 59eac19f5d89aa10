// Saving and loading checkpoints (layout in checkpoint.h): atomic file
// writes, the latest symlink, pruning, and the checks that a checkpoint
// matches the program it is loaded into.
#include "checkpoint.h"

#include "otcrt/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace otcrt {
namespace {

constexpr const char *kFormat = "otc-checkpoint-1";
/// Metadata of the buffers (checkpoint.h): where their values come from,
/// and each one's CRC-32 under this prefix and its name.
constexpr const char *kBuffersKey = "buffers";
constexpr const char *kBuffersFromInit = "init";
constexpr const char *kBufferCrcPrefix = "buffer_crc32/";

/// \p v as eight lower-case hex digits (the "crc32/" metadata's form).
std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

/// Parses eight hex digits into \p out.
bool parseHex8(const std::string &s, uint32_t &out) {
  if (s.size() != 8 ||
      s.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    return false;
  out = static_cast<uint32_t>(std::strtoul(s.c_str(), nullptr, 16));
  return true;
}

/// fsyncs the directory \p dir so a rename in it is durable.
void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    (void)fsync(fd);
    ::close(fd);
  }
}

/// The directory part of \p path ("." when none).
std::string dirName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool exists(const std::string &path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

/// Creates \p dir (one level) unless it exists.
Status makeDirectory(const std::string &dir) {
  if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    return Status::error("cannot create directory " + dir + ": " +
                         std::strerror(errno));
  return Status::ok();
}

/// Points symlink \p link at \p target atomically (temporary link + rename).
Status replaceSymlink(const std::string &target, const std::string &link) {
  std::string tmp = link + ".tmp";
  ::unlink(tmp.c_str());
  if (symlink(target.c_str(), tmp.c_str()) != 0 ||
      std::rename(tmp.c_str(), link.c_str()) != 0)
    return Status::error("cannot update " + link + ": " + std::strerror(errno));
  syncDirectory(dirName(link));
  return Status::ok();
}

/// Removes a step directory and the files in it.
void removeStepDirectory(const std::string &dir) {
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..")
        ::unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  ::rmdir(dir.c_str());
}

/// Keeps the \p keep newest step-* directories of \p root (and \p current).
void prune(const std::string &root, int64_t keep, const std::string &current) {
  std::vector<std::string> steps;
  if (DIR *d = opendir(root.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("step-", 0) == 0 && name.find('.') == std::string::npos)
        steps.push_back(name);
    }
    closedir(d);
  }
  std::sort(steps.begin(), steps.end()); // zero-padded: by step
  int64_t excess = static_cast<int64_t>(steps.size()) - keep;
  for (int64_t i = 0; i < excess; ++i)
    if (steps[i] != current)
      removeStepDirectory(root + "/" + steps[i]);
}

/// A file of tensors to write: each one's bytes held (from a host image) or
/// those of an arena slot (`slotOf`), downloaded as the file is written.
struct SlotTensors {
  TensorFile file;
  std::vector<const OtcSlot *> slotOf; ///< per tensor: its slot, or null
};

/// Adds \p slots to \p out under \p prefix + slot name, without bytes.
void addSlotLayouts(SlotTensors &out, const std::vector<const OtcSlot *> &slots,
                    const std::string &prefix) {
  for (const OtcSlot *slot : slots) {
    Tensor t;
    t.name = prefix + slot->name;
    t.dtype = slot->dtype == OTC_BF16 ? StDType::BF16 : StDType::F32;
    t.shape = slotShape(*slot);
    out.file.tensors.push_back(std::move(t));
    out.slotOf.push_back(slot);
  }
}

/// Writes \p t to \p path atomically with every tensor's CRC-32: the
/// header with every sum 0, then each tensor (a slot's bytes downloaded
/// into one staging buffer), summed as it is written, then the header
/// again with the sums (eight hex digits each: the same size). Host memory
/// holds one slot at a time, not the file (an 8B model's masters and
/// moments are 96 GB), and each slot is read from the arena once.
Status writeSlotTensors(const std::string &path, SlotTensors &t,
                        Backend &backend, const char *arena) {
  t.slotOf.resize(t.file.tensors.size(), nullptr);
  std::vector<uint8_t> staging;
  auto bytesOf = [&](size_t i, const uint8_t *&data, size_t &size) {
    const OtcSlot *slot = t.slotOf[i];
    if (!slot) {
      data = t.file.tensors[i].data.data();
      size = t.file.tensors[i].data.size();
      return Status::ok();
    }
    staging.resize(static_cast<size_t>(slot->nbytes));
    data = staging.data();
    size = staging.size();
    return backend.download(arena, slot->offset, staging.data(), slot->nbytes);
  };
  for (const Tensor &tensor : t.file.tensors)
    setChecksum(t.file, tensor.name, 0);
  std::vector<uint8_t> header;
  if (Status h = serializeSafetensorsLayoutHeader(t.file, header); !h)
    return h;
  auto summed = [&](size_t i, const uint8_t *&data, size_t &size) {
    Status s = bytesOf(i, data, size);
    if (s)
      setChecksum(t.file, t.file.tensors[i].name, crc32(data, size));
    return s;
  };
  return writeFileAtomic(path, header, t.file.tensors.size(), summed,
                         [&](std::vector<uint8_t> &last) {
                           return serializeSafetensorsLayoutHeader(t.file,
                                                                   last);
                         });
}

/// Sets \p out to tensor \p prefix + the name of \p slot in \p file (read
/// from \p path), checked to be of the slot's type (F32, or a BF16 buffer's
/// BF16) and shape.
Status slotTensor(const TensorFile &file, const std::string &path,
                  const std::string &prefix, const OtcSlot &slot,
                  const Tensor *&out) {
  std::string name = prefix + slot.name;
  out = file.find(name);
  if (!out)
    return Status::error(path + ": '" + name +
                         "' not found: the checkpoint is of another model");
  StDType want = slot.dtype == OTC_BF16 ? StDType::BF16 : StDType::F32;
  if (out->dtype != want || out->shape != slotShape(slot))
    return Status::error(path + ": '" + name + "' is " + dtypeName(out->dtype) +
                         " " + formatShape(out->shape) +
                         ", the program needs " + dtypeName(want) + " " +
                         formatShape(slotShape(slot)));
  return Status::ok();
}

/// Uploads tensors \p prefix + name of \p file into \p slots, checking them.
Status loadSlots(const TensorFile &file, const std::string &path,
                 const std::vector<const OtcSlot *> &slots,
                 const std::string &prefix, Backend &backend, char *arena) {
  for (const OtcSlot *slot : slots) {
    const Tensor *t = nullptr;
    if (Status s = slotTensor(file, path, prefix, *slot, t); !s)
      return s;
    Status s =
        backend.upload(arena, slot->offset, t->data.data(), slot->nbytes);
    if (!s)
      return s;
  }
  return Status::ok();
}

/// The element of the ZeRO-1 groups where \p param (a PARAM slot) starts.
int64_t groupElement(const OtcOptimizerShards &shards, const OtcSlot &param) {
  return (param.offset - shards.param_offset) / 4;
}

/// Adds the tensors of every parameter from \p image (a whole group)
/// under \p prefix.
void addFromImage(TensorFile &file, const ProgramSlots &slots,
                  const ShardedMoments &moments,
                  const std::vector<float> &image, const std::string &prefix) {
  for (const OtcSlot *slot : slots.params)
    file.add(prefix + std::string(slot->name), StDType::F32, slotShape(*slot),
             image.data() + groupElement(*moments.shards, *slot));
}

/// Adds the moments of every parameter from \p moments' images.
void addShardedMoments(TensorFile &file, const ProgramSlots &slots,
                       const ShardedMoments &moments) {
  addFromImage(file, slots, moments, moments.m, "adam_m/");
  addFromImage(file, slots, moments, moments.v, "adam_v/");
}

/// Reads the moments of every parameter into \p moments' images, and the
/// parameters where they are sharded too.
Status loadShardedMoments(const TensorFile &file, const std::string &path,
                          const ProgramSlots &slots, ShardedMoments &moments) {
  std::vector<std::pair<std::vector<float> *, const char *>> images = {
      {&moments.m, "adam_m/"}, {&moments.v, "adam_v/"}};
  if (!moments.params.empty())
    images.push_back({&moments.params, "param/"});
  for (auto [image, prefix] : images)
    for (const OtcSlot *slot : slots.params) {
      const Tensor *t = nullptr;
      if (Status s = slotTensor(file, path, prefix, *slot, t); !s)
        return s;
      std::memcpy(image->data() + groupElement(*moments.shards, *slot),
                  t->data.data(), static_cast<size_t>(slot->nbytes));
    }
  return Status::ok();
}

/// Reads integer metadata \p key of \p file into \p out.
Status metaInt(const TensorFile &file, const std::string &path, const char *key,
               int64_t &out) {
  auto it = file.metadata.find(key);
  if (it == file.metadata.end())
    return Status::error(path + ": metadata '" + key + "' is missing");
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (errno || *end)
    return Status::error(path + ": metadata '" + key + "' is not an integer");
  out = v;
  return Status::ok();
}

/// The number of the N-th atomic write that pauses (OTC_TEST_SAVE_PAUSE).
int64_t pauseAt() {
  const char *v = std::getenv("OTC_TEST_SAVE_PAUSE");
  return v ? std::atoll(v) : 0;
}

} // namespace

Status writeFileAtomic(const std::string &path,
                       const std::vector<uint8_t> &bytes) {
  return writeFileAtomic(path, {{bytes.data(), bytes.size()}});
}

Status
writeFileAtomic(const std::string &path,
                const std::vector<std::pair<const uint8_t *, size_t>> &pieces) {
  return writeFileAtomic(path, {}, pieces.size(),
                         [&](size_t i, const uint8_t *&data, size_t &size) {
                           data = pieces[i].first;
                           size = pieces[i].second;
                           return Status::ok();
                         });
}

Status writeFileAtomic(
    const std::string &path, const std::vector<uint8_t> &header, size_t count,
    const std::function<Status(size_t, const uint8_t *&, size_t &)> &piece,
    const std::function<Status(std::vector<uint8_t> &)> &finalHeader) {
  static int64_t calls = 0;
  ++calls;
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd < 0)
    return Status::error("cannot write " + tmp + ": " + std::strerror(errno));
  auto fail = [&](Status s) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  auto put = [&](const uint8_t *data, size_t size) -> Status {
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::write(fd, data + done, size - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return Status::error("cannot write " + tmp + ": " +
                             std::strerror(errno));
      done += static_cast<size_t>(n);
    }
    return Status::ok();
  };
  if (Status s = put(header.data(), header.size()); !s)
    return fail(s);
  for (size_t i = 0; i < count; ++i) {
    const uint8_t *data = nullptr;
    size_t size = 0;
    Status s = piece(i, data, size);
    if (s)
      s = put(data, size);
    if (!s)
      return fail(s);
  }
  if (finalHeader) {
    std::vector<uint8_t> last;
    if (Status s = finalHeader(last); !s)
      return fail(s);
    if (last.size() != header.size())
      return fail(Status::error("internal error: the header of " + path +
                                " changed size while it was written"));
    if (::pwrite(fd, last.data(), last.size(), 0) !=
        static_cast<ssize_t>(last.size()))
      return fail(
          Status::error("cannot write " + tmp + ": " + std::strerror(errno)));
  }
  if (fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::error("cannot flush " + tmp + ": " + std::strerror(errno));
  }
  if (calls == pauseAt()) {
    std::fprintf(stderr, "otc train: paused before rename of %s\n",
                 path.c_str());
    std::fflush(stderr);
    sleep(600);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Status::error("cannot rename " + tmp + " to " + path + ": " +
                         std::strerror(errno));
  }
  syncDirectory(dirName(path));
  return Status::ok();
}

Status saveCheckpoint(const std::string &root, int64_t keep,
                      const ProgramSlots &slots, Backend &backend,
                      const char *arena, const TrainState &state,
                      const BufferChecksums &buffers, const std::string &model,
                      std::string &written, const ShardedMoments *moments) {
  Status s = makeDirectory(root);
  if (!s)
    return s;
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld",
                static_cast<long long>(state.step));
  std::string dir = root + "/" + name;
  if (s = makeDirectory(dir); !s)
    return s;

  SlotTensors stateFile;
  TensorFile &st = stateFile.file;
  st.metadata["format"] = kFormat;
  st.metadata["model"] = model;
  st.metadata["step"] = std::to_string(state.step);
  st.metadata["updates"] = std::to_string(state.updates);
  st.metadata["skipped"] = std::to_string(state.skipped);
  st.metadata["seed"] = std::to_string(static_cast<int64_t>(state.seed));
  st.metadata["tokens_seen"] = std::to_string(state.tokensSeen);
  st.metadata["data_epoch"] = std::to_string(state.dataEpoch);
  st.metadata["data_cursor"] = std::to_string(state.dataCursor);
  st.metadata["data_fingerprint"] = std::to_string(state.dataFingerprint);
  // The buffers are the initial parameters': their CRC-32s, not their
  // bytes (a LoRA run's frozen base would be most of the file).
  st.metadata[kBuffersKey] = kBuffersFromInit;
  for (const OtcSlot *slot : slots.buffers) {
    auto it = buffers.find(slot->name);
    if (it == buffers.end())
      return Status::error(
          std::string("internal error: no CRC-32 of buffer '") + slot->name +
          "' to save");
    st.metadata[kBufferCrcPrefix + std::string(slot->name)] = hex8(it->second);
  }
  // With the masters sharded, the parameters come from the gathered image.
  const bool paramImage = moments && !moments->params.empty();
  for (auto [list, prefix] : {std::pair{&slots.params, "param/"},
                              {&slots.adamM, "adam_m/"},
                              {&slots.adamV, "adam_v/"}}) {
    if (paramImage && list == &slots.params) {
      addFromImage(st, slots, *moments, moments->params, prefix);
      stateFile.slotOf.resize(st.tensors.size(), nullptr);
    } else {
      addSlotLayouts(stateFile, *list, prefix);
    }
  }
  if (moments)
    addShardedMoments(st, slots, *moments);
  // Each file written a tensor at a time from the arena (or the host
  // images): no copy of the parameters and moments in host memory (a 1B
  // model's save held 15 GB beside the arena, past a 23 GB machine).
  if (s = writeSlotTensors(dir + "/state.safetensors", stateFile, backend,
                           arena);
      !s)
    return s;
  stateFile = SlotTensors();
  SlotTensors weights;
  weights.file.metadata["format"] = "otc-weights";
  weights.file.metadata["model"] = model;
  weights.file.metadata["step"] = std::to_string(state.step);
  if (paramImage)
    addFromImage(weights.file, slots, *moments, moments->params, "");
  else
    addSlotLayouts(weights, slots.params, "");
  if (s = writeSlotTensors(dir + "/model.safetensors", weights, backend, arena);
      !s)
    return s;
  syncDirectory(root);
  if (s = replaceSymlink(name, root + "/latest"); !s)
    return s;
  for (const char *file : {"model.safetensors", "state.safetensors"}) {
    std::string link = root + "/" + file;
    if (!exists(link))
      if (s = replaceSymlink(std::string("latest/") + file, link); !s)
        return s;
  }
  prune(root, keep, name);
  written = dir;
  return Status::ok();
}

Status loadCheckpoint(const std::string &dir, const ProgramSlots &slots,
                      Backend &backend, char *arena, TrainState &state,
                      std::string &from, CheckpointBuffers &buffers,
                      ShardedMoments *moments) {
  from = exists(dir + "/latest") ? dir + "/latest" : dir;
  std::string path = from + "/state.safetensors";
  TensorFile st;
  Status s = readSafetensors(path, st);
  if (!s)
    return Status::error("cannot resume (--resume " + dir +
                         "): " + s.message());
  auto fmt = st.metadata.find("format");
  if (fmt == st.metadata.end() || fmt->second != kFormat)
    return Status::error(path +
                         ": not an otc checkpoint (metadata format is not " +
                         std::string(kFormat) + ")");
  bool checked = false;
  if (s = verifyChecksums(st, path, checked); !s)
    return s;
  if (!checked)
    std::fprintf(stderr,
                 "otc train: warning: %s has no checksums (saved before they "
                 "were stored); resuming without verifying it\n",
                 path.c_str());
  int64_t seed = 0, fingerprint = 0;
  for (auto [key, field] : {std::pair{"step", &state.step},
                            {"updates", &state.updates},
                            {"skipped", &state.skipped},
                            {"tokens_seen", &state.tokensSeen},
                            {"data_epoch", &state.dataEpoch},
                            {"data_cursor", &state.dataCursor},
                            {"seed", &seed},
                            {"data_fingerprint", &fingerprint}})
    if (s = metaInt(st, path, key, *field); !s)
      return s;
  state.seed = static_cast<uint64_t>(seed);
  state.dataFingerprint = static_cast<uint64_t>(fingerprint);
  buffers = CheckpointBuffers();
  buffers.path = path;
  auto marker = st.metadata.find(kBuffersKey);
  if (marker != st.metadata.end()) {
    // The buffers come from the initial parameters: their CRC-32s alone.
    if (marker->second != kBuffersFromInit)
      return Status::error(path + ": metadata '" + kBuffersKey + "' is '" +
                           marker->second + "', this runtime knows '" +
                           kBuffersFromInit + "'");
    buffers.fromInit = true;
    for (const OtcSlot *slot : slots.buffers) {
      std::string key = kBufferCrcPrefix + std::string(slot->name);
      auto it = st.metadata.find(key);
      if (it == st.metadata.end())
        return Status::error(path + ": metadata '" + key +
                             "' not found: the checkpoint is of another model");
      if (!parseHex8(it->second, buffers.crc[slot->name]))
        return Status::error(path + ": metadata '" + key + "' is '" +
                             it->second + "', not eight hex digits");
    }
  } else {
    // Saved before: the buffers' bytes are "buffer/" tensors.
    if (s = loadSlots(st, path, slots.buffers, "buffer/", backend, arena); !s)
      return s;
    for (const OtcSlot *slot : slots.buffers) {
      const Tensor *t = st.find("buffer/" + std::string(slot->name));
      buffers.crc[slot->name] = crc32(t->data.data(), t->data.size());
    }
  }
  const bool paramImage = moments && !moments->params.empty();
  for (auto [list, prefix] : {std::pair{&slots.params, "param/"},
                              {&slots.adamM, "adam_m/"},
                              {&slots.adamV, "adam_v/"}}) {
    if (paramImage && list == &slots.params)
      continue; // into the image, with the moments below
    if (s = loadSlots(st, path, *list, prefix, backend, arena); !s)
      return s;
  }
  if (moments)
    return loadShardedMoments(st, path, slots, *moments);
  return Status::ok();
}

Status checkInitialBuffers(const ProgramSlots &slots,
                           const CheckpointBuffers &saved,
                           const BufferChecksums &loaded,
                           const std::map<std::string, std::string> &sources,
                           const std::string &dir) {
  for (const OtcSlot *slot : slots.buffers) {
    auto want = saved.crc.find(slot->name);
    auto got = loaded.find(slot->name);
    auto source = sources.find(slot->name);
    if (want == saved.crc.end() || got == loaded.end() ||
        source == sources.end())
      return Status::error(
          std::string("internal error: no CRC-32 of buffer '") + slot->name +
          "' to check");
    if (want->second != got->second)
      return Status::error(
          "cannot resume (--resume " + dir + "): buffer '" + slot->name +
          "' of " + source->second + " (crc32 " + hex8(got->second) +
          ") is not the one " + saved.path + " was saved with (crc32 " +
          hex8(want->second) +
          "): the checkpoint keeps only what trains, and resuming needs the "
          "initial parameters it was started from (--init PATH)");
  }
  return Status::ok();
}

} // namespace otcrt
