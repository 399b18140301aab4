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
#include "core/dtype.h"
#include "core/engine.h"
#include "core/gpt2_math.h"
#include "core/model.h"
#include "core/status.h"
#ifdef __cplusplus
}
#endif

#endif
