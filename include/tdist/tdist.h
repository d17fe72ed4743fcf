// The umbrella header: everything a tdist program uses.
#pragma once

#include "tdist/backend.h"
#include "tdist/cuda.h"
#include "tdist/device_mesh.h"
#include "tdist/distributed.h"
#include "tdist/dtype.h"
#include "tdist/errors.h"
#include "tdist/process_group.h"
#include "tdist/reduce_op.h"
#include "tdist/spawn.h"
#include "tdist/store.h"
#include "tdist/tensor.h"
#include "tdist/version.h"
#include "tdist/work.h"
