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
# Data-parallel tests start ranks with Open MPI's mpirun (installed by
# scripts/install-deps.sh), oversubscribing this machine's cores; as root
# it needs its consent variables.
import shutil
if shutil.which("mpirun"):
    config.available_features.add("mpirun")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"

# PyTorch's own launcher, where a developer has it (CI does not): the
# environment's OTC_TORCHRUN or a torchrun on PATH.
torchrun = os.environ.get("OTC_TORCHRUN") or shutil.which("torchrun")
if torchrun and os.access(torchrun, os.X_OK):
    config.available_features.add("torchrun")
    config.substitutions.append(("%torchrun", torchrun))

# Python's tokenizers (from PyPI, into .deps/python by
# scripts/install-deps.sh) and sentencepiece (Debian's python3-sentencepiece)
# for otc-data --tokenizer; the tests name them as features.
import subprocess
deps_python = os.path.join(config.otc_src_root, ".deps", "python")
config.environment["PYTHONPATH"] = os.pathsep.join(
    p for p in [deps_python, os.environ.get("PYTHONPATH", "")] if p)
for module in ["tokenizers", "sentencepiece"]:
    if subprocess.call([config.python, "-c", "import " + module],
                       env=dict(os.environ, PYTHONPATH=config.environment["PYTHONPATH"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
        config.available_features.add(module)
