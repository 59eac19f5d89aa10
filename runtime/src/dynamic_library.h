// A shared library opened while a program runs (dlopen), for the libraries
// only some runs need: MPI and NCCL, loaded when there is more than one
// rank, so that a program links neither.
#ifndef OTCRT_DYNAMIC_LIBRARY_H
#define OTCRT_DYNAMIC_LIBRARY_H

#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace otcrt {

class DynamicLibrary {
public:
  /// Opens the first of \p names that loads (RTLD_NOW | RTLD_GLOBAL: Open
  /// MPI's plugins resolve against it); false with dlerror's text in
  /// \p why when none does. Opening an open library does nothing.
  bool open(std::initializer_list<const char *> names, std::string &why) {
    for (const char *name : names)
      if (handle_ || (handle_ = dlopen(name, RTLD_NOW | RTLD_GLOBAL)))
        return true;
    const char *error = dlerror();
    why = error ? error : "not found";
    return false;
  }
  bool isOpen() const { return handle_ != nullptr; }
  /// Sets \p out to the address of symbol \p name (a function or an
  /// object), cast to its type; false when the library lacks it.
  template <typename T> bool bind(T &out, const char *name) {
    out = reinterpret_cast<T>(dlsym(handle_, name));
    return out != nullptr;
  }

private:
  void *handle_ = nullptr;
};

} // namespace otcrt

#endif // OTCRT_DYNAMIC_LIBRARY_H
