# Sourced by the recording scripts that run on the device machine (repository root, .devdeps
# carried): what every program started there needs. Sets NSYS.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
# No NVLink multicast on the lent machines (GPU-NOTES.md), in every program started here;
# nsdiag passes them on untouched.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# nsys's importer needs libdw (GPU-NOTES.md): unpacked from the carried Debian packages.
mkdir -p /tmp/dw && for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/dw; done
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
NSYS=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys
