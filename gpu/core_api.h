/* core_api.h: the core/ headers the gpu/ sources use, with C linkage when compiled as C++ (core/
 * is C and its headers carry no extern "C"). Include this instead of core/ headers in gpu/. */
#ifndef TOKENTOP_GPU_CORE_API_H
#define TOKENTOP_GPU_CORE_API_H

/* The system headers core/ includes, first and outside the C block. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core/base/dtype.h"
#include "core/engine/attention.h"
#include "core/engine/engine.h"
#include "core/arch/block_math.h"
#include "core/model/model.h"
#include "core/base/status.h"
#ifdef __cplusplus
}
#endif

#endif
