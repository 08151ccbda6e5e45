// How hvdtune._core hands its runtime to the other extension modules of the
// same build (hvdtune._c10d): _core.runtime_ref(process_set) returns a
// PyCapsule of this name holding a std::weak_ptr<hvdtune::Runtime>.
#pragma once

namespace hvdtune::python {

/// The capsule's name (PyCapsule_GetPointer checks it).
inline constexpr const char* kRuntimeRefCapsule = "hvdtune.runtime_ref";

}  // namespace hvdtune::python
