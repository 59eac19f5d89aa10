//===- OtckDialect.h - the otck buffer-level dialect -------------*- C++ -*-===//
//
// Declares the `otck` dialect: arena buffers, kernels and library calls.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_OTCKDIALECT_H
#define OTC_IR_OTCKDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/OtckDialect.h.inc"

#define GET_OP_CLASSES
#include "ir/OtckOps.h.inc"

namespace otc::otck {
/// Module attribute set by buffer planning: the arena's size in bytes.
constexpr const char kArenaSizeAttr[] = "otck.arena_size";
/// Module attribute set by buffer planning: every buffer's offset is a
/// multiple of it, and the bytes up to the next multiple after a buffer are
/// padding no buffer uses.
constexpr const char kAlignmentAttr[] = "otck.alignment";

/// Slots named "group:<kind>" (otc-group-params) hold every trained
/// parameter's slot of one kind ("param", "grad", ...) in one flat range:
/// the group buffer lists its members (`otck.members`, slot names) and each
/// member's first element in it (`otck.member_offsets`), and buffer planning
/// places the members there. A group is private to the generated code and
/// holds no bytes of its own beyond its members' padding.
constexpr const char kGroupSlotPrefix[] = "group:";
constexpr const char kMembersAttr[] = "otck.members";
/// ZeRO-1 with the FP32 masters sharded: the rank's part of "group:param"
/// names the whole group's members (kImageMembersAttr) and their element
/// offsets in it (kImageOffsetsAttr); each member's slot buffer carries
/// kImageMemberAttr and is planned at its place in that whole image, past
/// the rank's part, with no bytes of its own.
constexpr const char kImageMembersAttr[] = "otck.image_members";
constexpr const char kImageOffsetsAttr[] = "otck.image_offsets";
constexpr const char kImageMemberAttr[] = "otck.image_member";
constexpr const char kMemberOffsetsAttr[] = "otck.member_offsets";
inline bool isGroupSlot(llvm::StringRef slot) {
  return slot.starts_with(kGroupSlotPrefix);
}

/// Whether @zero_grads or @micro_step reads an FP32 parameter slot
/// ("param:<name>" or the group "group:param"). Under mixed precision with
/// BF16 working copies they read the copies alone: ZeRO-1 then gathers the
/// FP32 parameters only for checkpoints, not after every update.
bool stepsReadParams(mlir::ModuleOp module);

/// Calls `fn` once per persistent slot of `module` (its first buffer op),
/// with the slot's kind (the name's part before ':', "grad" for
/// "grad:wte.weight"); group slots, whose bytes are their members', are left
/// out, except a group without members (a rank's shard of the AdamW moments
/// under ZeRO-1), which comes with the kind after "group:".
void forEachSlot(mlir::ModuleOp module,
                 llvm::function_ref<void(llvm::StringRef kind, BufferOp)> fn);

/// The buffer whose bytes `v` (a buffer or a chain of views of one) are.
mlir::Value storageOf(mlir::Value v);

/// Calls `fn` for every op that uses the bytes of `buffer`: its users and,
/// through views, theirs (the views themselves excluded).
void forEachByteUser(mlir::Value buffer,
                     llvm::function_ref<void(mlir::Operation *)> fn);

/// The operands `op` may write: a kernel's outputs, a GEMM's written
/// buffers (GemmOp::getWrittenBuffers), a copy's target, a quantize's copy;
/// none for a view, a buffer or a return; every operand of any other op.
llvm::SmallVector<mlir::Value> writtenBy(mlir::Operation *op);

/// Whether an op strictly between `a` and `b` (one block, either order)
/// writes the bytes of `storage` (`touch`: or uses them at all; views do
/// not count).
bool usedBetween(mlir::Operation *a, mlir::Operation *b, mlir::Value storage,
                 bool touch);
} // namespace otc::otck

#endif // OTC_IR_OTCKDIALECT_H
