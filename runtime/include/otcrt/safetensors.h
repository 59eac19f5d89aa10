// Reader and writer for the safetensors file format: an 8-byte little-endian
// header length, a JSON header mapping tensor names to {dtype, shape,
// data_offsets} (plus an optional "__metadata__" string map), then the raw
// little-endian tensor bytes. Files are loaded fully into memory; every
// structural problem (truncation, malformed JSON, bad offsets, size
// mismatches) is reported as a Status naming the file and the byte offset.
#ifndef OTCRT_SAFETENSORS_H
#define OTCRT_SAFETENSORS_H

#include "otcrt/status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace otcrt {

/// Element types of the safetensors format.
enum class StDType {
  BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64
};

/// Returns the size of one element of \p dtype in bytes.
size_t dtypeSize(StDType dtype);
/// Returns the safetensors spelling of \p dtype ("F32", "I64", ...).
const char *dtypeName(StDType dtype);
/// Parses a safetensors dtype spelling; returns false if unknown.
bool parseDTypeName(const std::string &name, StDType &out);

/// Returns the number of elements of \p shape (1 for a scalar).
int64_t numElements(const std::vector<int64_t> &shape);
/// Formats \p shape as "[2, 3]" ("[]" for a scalar).
std::string formatShape(const std::vector<int64_t> &shape);

/// One named tensor with its raw little-endian bytes.
struct Tensor {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  /// Number of elements.
  int64_t numel() const { return numElements(shape); }
};

/// The contents of one safetensors file, tensors in file (offset) order.
struct TensorFile {
  std::vector<Tensor> tensors;
  std::map<std::string, std::string> metadata;

  /// Returns the tensor named \p name or nullptr.
  const Tensor *find(const std::string &name) const;
  Tensor *find(const std::string &name);
  /// Appends a tensor built from \p bytes (numel(shape) * dtypeSize bytes).
  void add(std::string name, StDType dtype, std::vector<int64_t> shape,
           const void *bytes);
  /// Appends a tensor without its bytes: a layout entry for
  /// serializeSafetensorsLayoutHeader and writeSafetensorsFrom.
  void addLayout(std::string name, StDType dtype, std::vector<int64_t> shape);
};

/// Parses an in-memory safetensors image; \p sourceName is used in errors.
Status parseSafetensors(const uint8_t *data, size_t size,
                        const std::string &sourceName, TensorFile &out);
/// Reads and parses the file at \p path.
Status readSafetensors(const std::string &path, TensorFile &out);
/// Reads the tensors of \p path that \p keep accepts (by name), with the
/// metadata: the whole header is checked as by readSafetensors, but the
/// bytes of the other tensors are not read (a checkpoint's buffers from a
/// file that also holds every parameter). A pipe is read whole and the
/// others dropped.
Status readSafetensors(const std::string &path, TensorFile &out,
                       const std::function<bool(const std::string &)> &keep);
/// Reads the header of \p path alone, checked as by readSafetensors: every
/// tensor's name, dtype and shape, with no data (a large file's layout,
/// before its tensors are read a few at a time). Fails for a file that is
/// not seekable (a pipe), which only a whole read can take.
Status readSafetensorsLayout(const std::string &path, TensorFile &out);
/// Serializes \p file into \p out (header padded to a multiple of 8 bytes).
Status serializeSafetensors(const TensorFile &file, std::vector<uint8_t> &out);
/// What comes before the tensors' data in \p file's serialization (the
/// header's length and the header): the data follows it in the order of
/// file.tensors, so that a large file can be written piece by piece.
Status serializeSafetensorsHeader(const TensorFile &file,
                                  std::vector<uint8_t> &out);
/// The same, where a tensor may come without its bytes (written later, from
/// elsewhere): its size is its shape's and dtype's.
Status serializeSafetensorsLayoutHeader(const TensorFile &file,
                                        std::vector<uint8_t> &out);
/// Writes \p file to \p path.
Status writeSafetensors(const std::string &path, const TensorFile &file);
/// Writes to \p path a file of \p layout's tensors (names, dtypes, shapes
/// and metadata; their bytes are not read) whose bytes \p bytes gives in
/// turn, in file order, as each is written: a pointer to the tensor's
/// numel * dtypeSize bytes, valid until the next call, or an error that
/// ends the write. A caller that makes each tensor when asked holds one at
/// a time (otc-compile's initial parameters, otc-export's state dict).
Status writeSafetensorsFrom(
    const std::string &path, const TensorFile &layout,
    const std::function<Status(size_t index, const void *&data)> &bytes);

/// CRC-32 of \p size bytes (the IEEE 802.3 polynomial, reflected, as zlib's
/// crc32), continuing from \p crc (0 for a fresh sum).
uint32_t crc32(const uint8_t *data, size_t size, uint32_t crc = 0);
/// Stores each tensor's CRC-32 in the metadata as "crc32/<name>" (eight
/// lower-case hex digits).
void addChecksums(TensorFile &file);
/// Stores \p crc as tensor \p tensor's CRC-32 in \p file's metadata, as
/// addChecksums does (for a tensor whose bytes the file does not hold).
void setChecksum(TensorFile &file, const std::string &tensor, uint32_t crc);
/// Checks every tensor of \p file against its "crc32/<name>" metadata: an
/// error naming \p path and the first tensor whose bytes do not match, or
/// whose checksum is missing while others are there. \p checked is false
/// when the file holds no checksum at all (written before they were
/// stored), which is not an error.
Status verifyChecksums(const TensorFile &file, const std::string &path,
                       bool &checked);

} // namespace otcrt

#endif // OTCRT_SAFETENSORS_H
