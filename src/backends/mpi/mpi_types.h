// tdist's dtypes and reduce ops as MPI datatypes and MPI_Ops. MPI's own ops
// serve where they give tdist's results; elsewhere (float16, bfloat16, bool,
// floating MIN/MAX with torch's NaN rule) a user-defined MPI_Op runs tdist's
// own kernels (src/reduce), so both backends agree bit for bit.
#pragma once

#include <mpi.h>

#include "tdist/dtype.h"
#include "tdist/reduce_op.h"

namespace tdist::mpi {

MPI_Datatype datatype_of(DType dtype);
// The MPI_Op that combines two inputs for `op`: AVG and PREMUL_SUM combine as
// SUM (the caller then applies reduction::finalize).
MPI_Op op_of(ReduceOp op, DType dtype);
// Frees the datatypes and ops made here; before MPI_Finalize.
void release_types();

}  // namespace tdist::mpi
