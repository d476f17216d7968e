/* MKL's answer to "is this an Intel CPU?", made "yes" on every x86-64 CPU.
 *
 * MKL takes its conditional-numerical-reproducibility branch (MKL_CBWR=AVX2: the same results on every CPU
 * that has AVX2) only on Intel CPUs; on any other it ignores the setting and takes a branch of its own, whose
 * matrix products round differently (docs/reproducibility.md). MKL, linked into torch's libtorch_cpu.so, asks
 * through this exported function; loaded into the process before torch (blocklab.run.numerics.pin), this
 * definition answers first, and every x86-64 CPU with AVX2 runs MKL's AVX2 kernels, the same code on all.
 * Measured: an AMD EPYC with it and emulated Intel and AMD CPUs compute the same SGEMM bits.
 */
int mkl_serv_intel_cpu_true(void) { return 1; }
