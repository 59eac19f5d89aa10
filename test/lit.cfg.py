# lit configuration for otc: every test under test/ that ends in .mlir or .test.
import os
import lit.formats

config.name = "otc"
config.test_format = lit.formats.ShTest(not lit_config.isWindows)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.otc_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.otc_tools_dir, os.path.dirname(config.filecheck), config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%otc_src", config.otc_src_root))
config.substitutions.append(("%otc_obj", config.otc_obj_root))
config.substitutions.append(("%python", config.python))
config.substitutions.append(("%FileCheck", config.filecheck))
config.substitutions.append(("%not", config.not_tool))
if config.nvcc and config.has_cuda_runtime_lib:
    config.available_features.add("cuda-toolkit")
