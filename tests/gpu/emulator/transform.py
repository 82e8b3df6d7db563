#!/usr/bin/env python3
"""Rewrites a CUDA source so that g++ compiles it against emu_cuda.hpp.

Kernel launches become emu::launch calls, dynamic shared memory a pointer to
the emulator's buffer, and CUB / WMMA includes the emulator's stand-ins.
Usage: transform.py INPUT.cu OUTPUT.cpp
"""
import re
import sys

source = open(sys.argv[1]).read()
source = re.sub(r'extern __shared__ __align__\(\d+\) unsigned char (\w+)\[\];',
                r'unsigned char* \1 = ::emu::dynamic_shared();', source)
source = re.sub(r'extern __shared__ (\w+) (\w+)\[\];',
                r'\1* \2 = reinterpret_cast<\1*>(::emu::dynamic_shared());', source)
source = re.sub(r'([\w:]+(?:<[^<>;]*>)?)<<<([^;]*?)>>>\(([^;]*?)\);', r'::emu::launch(\1, \2, \3);', source)
replacements = {
    '#include <mma.h>': '',
    '#include <cub/block/block_reduce.cuh>': '#include "emu_cub.hpp"',
    '#include <cub/block/block_scan.cuh>': '',
    '#include <cub/device/device_segmented_radix_sort.cuh>': '#include "emu_cub.hpp"',
    '#include "kernels/cuda/sampling_device.cuh"': '#include "sampling_device.emu.hpp"',
    'cudaFuncSetAttribute(': '::emu::func_set_attribute(',
    'TROUPE_CUDA_CHECK_LAUNCH();': ';',
    '#pragma unroll': '',
    '__fadd_rn(': '::emu::fadd_rn(',
    '__fmul_rn(': '::emu::fmul_rn(',
    '__fsub_rn(': '::emu::fsub_rn(',
}
for old, new in replacements.items():
    source = source.replace(old, new)
open(sys.argv[2], 'w').write(source)
