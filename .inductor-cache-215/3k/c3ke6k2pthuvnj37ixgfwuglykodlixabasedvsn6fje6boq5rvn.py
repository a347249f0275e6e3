# AOT ID: ['40_backward']
from ctypes import c_void_p, c_long, c_int
import torch
import math
import random
import os
import tempfile
from math import inf, nan
from cmath import nanj
from torch._inductor.hooks import run_intermediate_hooks
from torch._inductor.utils import maybe_profile
from torch._inductor.codegen.memory_planning import _align as align
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_size_stride_grouped = torch._C._dynamo.guards.assert_size_stride_grouped
assert_alignment = torch._C._dynamo.guards.assert_alignment
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cpu_pinned = torch._C._dynamo.guards._empty_strided_cpu_pinned
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
empty_strided_xpu = torch._C._dynamo.guards._empty_strided_xpu
empty_strided_mtia = torch._C._dynamo.guards._empty_strided_mtia
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
alloc_from_pool = torch.ops.inductor._alloc_from_pool
async_compile = AsyncCompile()
empty_strided_p2p = torch._C._distributed_c10d._SymmetricMemory.empty_strided_p2p


cpp_fused__log_softmax__log_softmax_backward_data_arange_eq_expand_nll_loss_backward_scalar_tensor_view_0 = async_compile.cpp_pybinding(['float*', 'const int64_t*', 'const float*', 'const float*', 'const float*', 'const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const int64_t* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0_arr[16];
                    for (int i = 0; i < 16; i++)
                    {
                        tmp_acc0_arr[i] = 0;
                    }
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(64L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::VectorizedN<int64_t,2>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                                auto tmp16 = in_ptr1[static_cast<int64_t>(0L)];
                                auto tmp17 = in_ptr2[static_cast<int64_t>(0L)];
                                auto tmp1 = static_cast<int64_t>(-100);
                                auto tmp2 = at::vec::VectorizedN<int64_t,2>(tmp1);
                                auto tmp3 = at::vec::VecMask<int64_t,2>(tmp0 != tmp2);
                                auto tmp4 = static_cast<int64_t>(0);
                                auto tmp5 = at::vec::VectorizedN<int64_t,2>(tmp4);
                                auto tmp6 = decltype(tmp0)::blendv(tmp5, tmp0, inductor_vec_mask_cast<int64_t,2>(tmp3));
                                auto tmp7 = x1;
                                auto tmp8 = c10::convert<int64_t>(tmp7);
                                auto tmp9 = at::vec::VectorizedN<int64_t,2>(tmp8);
                                auto tmp10 = at::vec::VecMask<int64_t,2>(tmp6 == tmp9);
                                auto tmp11 = static_cast<float>(-1.0);
                                auto tmp12 = static_cast<float>(0.0);
                                auto tmp13 = at::vec::Vectorized<float>(tmp11);
                                auto tmp14 = at::vec::Vectorized<float>(tmp12);
                                auto tmp15 = decltype(tmp13)::blendv(tmp14, tmp13, inductor_vec_mask_cast<float,1>(tmp10));
                                auto tmp18 = tmp16 / tmp17;
                                auto tmp19 = at::vec::Vectorized<float>(tmp18);
                                auto tmp20 = decltype(tmp19)::blendv(tmp14, tmp19, inductor_vec_mask_cast<float,1>(tmp3));
                                auto tmp21 = tmp15 * tmp20;
                                tmp_acc0_vec = tmp_acc0_vec + tmp21;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                    {
                        tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(1L))
            {
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(64L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(64L)))
                        {
                            auto tmp0 = in_ptr0[static_cast<int64_t>(x0)];
                            auto tmp15 = in_ptr1[static_cast<int64_t>(0L)];
                            auto tmp16 = in_ptr2[static_cast<int64_t>(0L)];
                            auto tmp21 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x1 + 64L*x0), static_cast<int64_t>(16));
                            auto tmp22 = in_ptr3[static_cast<int64_t>(x0)];
                            auto tmp25 = in_ptr4[static_cast<int64_t>(x0)];
                            auto tmp29 = out_ptr0[static_cast<int64_t>(x0)];
                            auto tmp1 = static_cast<int64_t>(-100);
                            auto tmp2 = tmp0 != tmp1;
                            auto tmp3 = static_cast<int64_t>(0);
                            auto tmp4 = tmp2 ? tmp0 : tmp3;
                            auto tmp5 = x1;
                            auto tmp6 = c10::convert<int64_t>(tmp5);
                            auto tmp7 = at::vec::VectorizedN<int64_t,2>::arange(tmp6, 1);
                            auto tmp8 = at::vec::VectorizedN<int64_t,2>(tmp4);
                            auto tmp9 = at::vec::VecMask<int64_t,2>(tmp8 == tmp7);
                            auto tmp10 = static_cast<float>(-1.0);
                            auto tmp11 = static_cast<float>(0.0);
                            auto tmp12 = at::vec::Vectorized<float>(tmp10);
                            auto tmp13 = at::vec::Vectorized<float>(tmp11);
                            auto tmp14 = decltype(tmp12)::blendv(tmp13, tmp12, inductor_vec_mask_cast<float,1>(tmp9));
                            auto tmp17 = tmp15 / tmp16;
                            auto tmp18 = tmp2 ? tmp17 : tmp11;
                            auto tmp19 = at::vec::Vectorized<float>(tmp18);
                            auto tmp20 = tmp14 * tmp19;
                            auto tmp23 = at::vec::Vectorized<float>(tmp22);
                            auto tmp24 = tmp21 - tmp23;
                            auto tmp26 = at::vec::Vectorized<float>(tmp25);
                            auto tmp27 = tmp24 - tmp26;
                            auto tmp28 = tmp27.exp();
                            auto tmp30 = at::vec::Vectorized<float>(tmp29);
                            auto tmp31 = tmp28 * tmp30;
                            auto tmp32 = tmp20 - tmp31;
                            tmp32.store(in_out_ptr0 + static_cast<int64_t>(x1 + 64L*x0));
                        }
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused_native_layer_norm_backward_view_1 = async_compile.cpp_pybinding(['const float*', 'const float*', 'const float*', 'const float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(1L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    float tmp_acc1 = 0;
                    at::vec::Vectorized<float> tmp_acc1_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                                auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                                auto tmp2 = tmp0 * tmp1;
                                auto tmp4 = tmp2 * tmp3;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                                tmp_acc1_vec = tmp_acc1_vec + tmp4;
                            }
                        }
                    }
                    tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                    out_ptr0[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
                    tmp_acc1 = tmp_acc1 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc1_vec);
                    out_ptr1[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc1);
                }
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                        {
                            auto tmp0 = in_ptr3[static_cast<int64_t>(x0)];
                            auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp2 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp7 = out_ptr0[static_cast<int64_t>(x0)];
                            auto tmp10 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp11 = out_ptr1[static_cast<int64_t>(x0)];
                            auto tmp3 = tmp1 * tmp2;
                            auto tmp4 = static_cast<float>(32.0);
                            auto tmp5 = at::vec::Vectorized<float>(tmp4);
                            auto tmp6 = tmp3 * tmp5;
                            auto tmp8 = at::vec::Vectorized<float>(tmp7);
                            auto tmp9 = tmp6 - tmp8;
                            auto tmp12 = at::vec::Vectorized<float>(tmp11);
                            auto tmp13 = tmp10 * tmp12;
                            auto tmp14 = tmp9 - tmp13;
                            auto tmp15 = at::vec::Vectorized<float>(tmp0);
                            auto tmp16 = tmp15 * tmp14;
                            tmp16.store(out_ptr2 + static_cast<int64_t>(x1 + 32L*x0));
                        }
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    float tmp_acc1 = 0;
                    at::vec::Vectorized<float> tmp_acc1_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                                auto tmp2 = tmp0 * tmp1;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                                tmp_acc1_vec = tmp_acc1_vec + tmp0;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                    {
                        tmp_acc0_vec.store(out_ptr3 + static_cast<int64_t>(x0));
                        tmp_acc1_vec.store(out_ptr4 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__unsafe_view_gelu_gelu_backward_sum_view_2 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                                tmp_acc0_vec = tmp_acc0_vec + tmp0;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                    {
                        tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(4096L); x0+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(4096L)))
                    {
                        auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp2 = static_cast<float>(0.7071067811865476);
                        auto tmp3 = at::vec::Vectorized<float>(tmp2);
                        auto tmp4 = tmp1 * tmp3;
                        auto tmp5 = tmp4.erf();
                        auto tmp6 = static_cast<float>(1.0);
                        auto tmp7 = at::vec::Vectorized<float>(tmp6);
                        auto tmp8 = tmp5 + tmp7;
                        auto tmp9 = static_cast<float>(0.5);
                        auto tmp10 = at::vec::Vectorized<float>(tmp9);
                        auto tmp11 = tmp8 * tmp10;
                        auto tmp12 = tmp1 * tmp1;
                        auto tmp13 = static_cast<float>(-0.5);
                        auto tmp14 = at::vec::Vectorized<float>(tmp13);
                        auto tmp15 = tmp12 * tmp14;
                        auto tmp16 = tmp15.exp();
                        auto tmp17 = static_cast<float>(0.3989422804014327);
                        auto tmp18 = at::vec::Vectorized<float>(tmp17);
                        auto tmp19 = tmp16 * tmp18;
                        auto tmp20 = tmp1 * tmp19;
                        auto tmp21 = tmp11 + tmp20;
                        auto tmp22 = tmp0 * tmp21;
                        tmp22.store(in_out_ptr0 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__unsafe_view_add_gelu_gelu_backward_native_layer_norm_backward_sum_view_3 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(128L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(128L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0 + 128L*x1), static_cast<int64_t>(16));
                                tmp_acc0_vec = tmp_acc0_vec + tmp0;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(128L)))
                    {
                        tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(1L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    float tmp_acc1 = 0;
                    at::vec::Vectorized<float> tmp_acc1_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                                auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                                auto tmp2 = tmp0 * tmp1;
                                auto tmp4 = tmp2 * tmp3;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                                tmp_acc1_vec = tmp_acc1_vec + tmp4;
                            }
                        }
                    }
                    tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                    out_ptr1[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
                    tmp_acc1 = tmp_acc1 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc1_vec);
                    out_ptr2[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc1);
                }
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                        {
                            auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp1 = in_ptr4[static_cast<int64_t>(x0)];
                            auto tmp2 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp8 = out_ptr1[static_cast<int64_t>(x0)];
                            auto tmp11 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp12 = out_ptr2[static_cast<int64_t>(x0)];
                            auto tmp4 = tmp2 * tmp3;
                            auto tmp5 = static_cast<float>(32.0);
                            auto tmp6 = at::vec::Vectorized<float>(tmp5);
                            auto tmp7 = tmp4 * tmp6;
                            auto tmp9 = at::vec::Vectorized<float>(tmp8);
                            auto tmp10 = tmp7 - tmp9;
                            auto tmp13 = at::vec::Vectorized<float>(tmp12);
                            auto tmp14 = tmp11 * tmp13;
                            auto tmp15 = tmp10 - tmp14;
                            auto tmp16 = at::vec::Vectorized<float>(tmp1);
                            auto tmp17 = tmp16 * tmp15;
                            auto tmp18 = tmp0 + tmp17;
                            tmp18.store(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
                        }
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    float tmp_acc1 = 0;
                    at::vec::Vectorized<float> tmp_acc1_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                                auto tmp2 = tmp0 * tmp1;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                                tmp_acc1_vec = tmp_acc1_vec + tmp0;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                    {
                        tmp_acc0_vec.store(out_ptr3 + static_cast<int64_t>(x0));
                        tmp_acc1_vec.store(out_ptr4 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused_clone_sum_transpose_view_4 = async_compile.cpp_pybinding(['const float*', 'const float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0,
                       float* out_ptr1)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                                tmp_acc0_vec = tmp_acc0_vec + tmp0;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                    {
                        tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2L); x0+=static_cast<int64_t>(1L))
            {
                #pragma GCC ivdep
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(2L); x1+=static_cast<int64_t>(1L))
                {
                    #pragma GCC ivdep
                    for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(16L); x2+=static_cast<int64_t>(1L))
                    {
                        for(int64_t x3=static_cast<int64_t>(0L); x3<static_cast<int64_t>(16L); x3+=static_cast<int64_t>(16L))
                        {
                            {
                                if(C10_LIKELY(x3 >= static_cast<int64_t>(0) && x3 < static_cast<int64_t>(16L)))
                                {
                                    auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x3 + 16L*x1 + 32L*x2 + 512L*x0), static_cast<int64_t>(16));
                                    tmp0.store(out_ptr1 + static_cast<int64_t>(x3 + 16L*x2 + 256L*x1 + 512L*x0));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__softmax_backward_data_masked_fill_mul_nll_loss_backward_view_5 = async_compile.cpp_pybinding(['float*', 'const float*', 'const bool*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const bool* in_ptr2,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    auto in_ptr1 = in_out_ptr0;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(64L); x0+=static_cast<int64_t>(1L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(16L); x1+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(16L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 16L*x0), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 16L*x0), static_cast<int64_t>(16));
                                auto tmp2 = tmp0 * tmp1;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                            }
                        }
                    }
                    tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                    out_ptr0[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(4L); x0+=static_cast<int64_t>(1L))
            {
                #pragma GCC ivdep
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(16L); x1+=static_cast<int64_t>(1L))
                {
                    for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(16L); x2+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(16L)))
                            {
                                auto tmp0 = at::vec::VecMask<float,1>::from(in_ptr2 + static_cast<int64_t>(x2 + 16L*x1), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0), static_cast<int64_t>(16));
                                auto tmp3 = out_ptr0[static_cast<int64_t>(x1 + 16L*x0)];
                                auto tmp4 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0), static_cast<int64_t>(16));
                                auto tmp2 = tmp1.neg();
                                auto tmp5 = tmp4 * tmp1;
                                auto tmp6 = at::vec::Vectorized<float>(tmp3);
                                auto tmp7 = fmadd(tmp2, tmp6, tmp5);
                                auto tmp8 = static_cast<float>(0.0);
                                auto tmp9 = at::vec::Vectorized<float>(tmp8);
                                auto tmp10 = decltype(tmp9)::blendv(tmp7, tmp9, inductor_vec_mask_cast<float,1>(tmp0));
                                auto tmp11 = static_cast<float>(0.25);
                                auto tmp12 = at::vec::Vectorized<float>(tmp11);
                                auto tmp13 = tmp10 * tmp12;
                                tmp13.store(in_out_ptr0 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0));
                            }
                        }
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__unsafe_view_cat_clone_transpose_view_6 = async_compile.cpp_pybinding(['const float*', 'const float*', 'const float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2L); x0+=static_cast<int64_t>(1L))
            {
                #pragma GCC ivdep
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(16L); x1+=static_cast<int64_t>(1L))
                {
                    for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(32L); x2+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(16L*x1 + 256L*(c10::div_floor_integer(static_cast<int64_t>(x2), static_cast<int64_t>(16L))) + 512L*x0 + ((static_cast<int64_t>(x2) % static_cast<int64_t>(16L)))), static_cast<int64_t>(16));
                                tmp0.store(out_ptr0 + static_cast<int64_t>(x2 + 96L*x1 + 1536L*x0));
                            }
                        }
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2L); x0+=static_cast<int64_t>(1L))
            {
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(16L); x1+=static_cast<int64_t>(16L))
                {
                    for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(32L); x2+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(16L) && x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(32L)))
                            {
                                alignas(std::max(std::size_t(16), alignof(float))) float tmp0[16*16];
                                transpose_mxn<float,static_cast<int64_t>(16),static_cast<int64_t>(16),false>(in_ptr1 + static_cast<int64_t>(x1 + 16L*x2 + 512L*x0), static_cast<int64_t>(16L), tmp0, static_cast<int64_t>(16));
                                for (long x1_inner = 0; x1_inner < static_cast<int64_t>(16); x1_inner++)
                                {
                                    auto tmp1 = at::vec::Vectorized<float>::loadu(tmp0 + static_cast<int64_t>(16L*x1_inner), static_cast<int64_t>(16));
                                    tmp1.store(out_ptr1 + static_cast<int64_t>(x2 + 96L*x1 + 96L*x1_inner + 1536L*x0));
                                }
                            }
                        }
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2L); x0+=static_cast<int64_t>(1L))
            {
                #pragma GCC ivdep
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(16L); x1+=static_cast<int64_t>(1L))
                {
                    for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(32L); x2+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(16L*x1 + 256L*(c10::div_floor_integer(static_cast<int64_t>(x2), static_cast<int64_t>(16L))) + 512L*x0 + ((static_cast<int64_t>(x2) % static_cast<int64_t>(16L)))), static_cast<int64_t>(16));
                                tmp0.store(out_ptr2 + static_cast<int64_t>(x2 + 96L*x1 + 1536L*x0));
                            }
                        }
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused_add_native_layer_norm_backward_sum_view_7 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(96L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(96L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0 + 96L*x1), static_cast<int64_t>(16));
                                tmp_acc0_vec = tmp_acc0_vec + tmp0;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(96L)))
                    {
                        tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(1L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    float tmp_acc1 = 0;
                    at::vec::Vectorized<float> tmp_acc1_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                                auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                                auto tmp2 = tmp0 * tmp1;
                                auto tmp4 = tmp2 * tmp3;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                                tmp_acc1_vec = tmp_acc1_vec + tmp4;
                            }
                        }
                    }
                    tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                    out_ptr1[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
                    tmp_acc1 = tmp_acc1 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc1_vec);
                    out_ptr2[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc1);
                }
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                        {
                            auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp1 = in_ptr4[static_cast<int64_t>(x0)];
                            auto tmp2 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp8 = out_ptr1[static_cast<int64_t>(x0)];
                            auto tmp11 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp12 = out_ptr2[static_cast<int64_t>(x0)];
                            auto tmp4 = tmp2 * tmp3;
                            auto tmp5 = static_cast<float>(32.0);
                            auto tmp6 = at::vec::Vectorized<float>(tmp5);
                            auto tmp7 = tmp4 * tmp6;
                            auto tmp9 = at::vec::Vectorized<float>(tmp8);
                            auto tmp10 = tmp7 - tmp9;
                            auto tmp13 = at::vec::Vectorized<float>(tmp12);
                            auto tmp14 = tmp11 * tmp13;
                            auto tmp15 = tmp10 - tmp14;
                            auto tmp16 = at::vec::Vectorized<float>(tmp1);
                            auto tmp17 = tmp16 * tmp15;
                            auto tmp18 = tmp0 + tmp17;
                            tmp18.store(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
                        }
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    float tmp_acc1 = 0;
                    at::vec::Vectorized<float> tmp_acc1_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                                auto tmp2 = tmp0 * tmp1;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                                tmp_acc1_vec = tmp_acc1_vec + tmp0;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                    {
                        tmp_acc0_vec.store(out_ptr3 + static_cast<int64_t>(x0));
                        tmp_acc1_vec.store(out_ptr4 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused_add_embedding_dense_backward_native_layer_norm_backward_sum_view_8 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const int64_t*', 'const int64_t*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const int64_t* in_ptr5,
                       const int64_t* in_ptr6,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4,
                       float* out_ptr5,
                       float* out_ptr6)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(96L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(96L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0 + 96L*x1), static_cast<int64_t>(16));
                                tmp_acc0_vec = tmp_acc0_vec + tmp0;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(96L)))
                    {
                        tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2048L); x0+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(2048L)))
                    {
                        auto tmp0 = static_cast<float>(0.0);
                        auto tmp1 = at::vec::Vectorized<float>(tmp0);
                        tmp1.store(out_ptr1 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(1L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    float tmp_acc1 = 0;
                    at::vec::Vectorized<float> tmp_acc1_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                                auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                                auto tmp2 = tmp0 * tmp1;
                                auto tmp4 = tmp2 * tmp3;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                                tmp_acc1_vec = tmp_acc1_vec + tmp4;
                            }
                        }
                    }
                    tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                    out_ptr2[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
                    tmp_acc1 = tmp_acc1 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc1_vec);
                    out_ptr3[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc1);
                }
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                        {
                            auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp1 = in_ptr4[static_cast<int64_t>(x0)];
                            auto tmp2 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp8 = out_ptr2[static_cast<int64_t>(x0)];
                            auto tmp11 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp12 = out_ptr3[static_cast<int64_t>(x0)];
                            auto tmp19 = in_ptr5[static_cast<int64_t>(x0)];
                            auto tmp4 = tmp2 * tmp3;
                            auto tmp5 = static_cast<float>(32.0);
                            auto tmp6 = at::vec::Vectorized<float>(tmp5);
                            auto tmp7 = tmp4 * tmp6;
                            auto tmp9 = at::vec::Vectorized<float>(tmp8);
                            auto tmp10 = tmp7 - tmp9;
                            auto tmp13 = at::vec::Vectorized<float>(tmp12);
                            auto tmp14 = tmp11 * tmp13;
                            auto tmp15 = tmp10 - tmp14;
                            auto tmp16 = at::vec::Vectorized<float>(tmp1);
                            auto tmp17 = tmp16 * tmp15;
                            auto tmp18 = tmp0 + tmp17;
                            auto tmp20 = static_cast<int64_t>(63);
                            auto tmp21 = min_propagate_nan(tmp20, tmp19);
                            auto tmp22 = static_cast<int64_t>(-64);
                            auto tmp23 = max_propagate_nan(tmp22, tmp21);
                            auto tmp24 = 64L;
                            auto tmp25 = c10::convert<int64_t>(tmp24);
                            auto tmp26 = int64_t(static_cast<std::make_unsigned_t<int64_t>>(tmp23) + static_cast<std::make_unsigned_t<int64_t>>(tmp25));
                            auto tmp27 = tmp23 < 0;
                            auto tmp28 = tmp27 ? tmp26 : tmp23;
                            auto tmp29 = static_cast<int64_t>(0);
                            auto tmp30 = tmp19 >= tmp29;
                            auto tmp31 = static_cast<int64_t>(64);
                            auto tmp32 = tmp19 < tmp31;
                            auto tmp33 = decltype(tmp30)(tmp30 & tmp32);
                            auto tmp34 = static_cast<int64_t>(-1);
                            auto tmp35 = tmp19 != tmp34;
                            auto tmp36 = decltype(tmp33)(tmp33 & tmp35);
                            auto tmp37 = static_cast<float>(0.0);
                            auto tmp38 = at::vec::VecMask<float,1>::from(tmp36);
                            auto tmp39 = at::vec::Vectorized<float>(tmp37);
                            auto tmp40 = decltype(tmp18)::blendv(tmp39, tmp18, inductor_vec_mask_cast<float,1>(tmp38));
                            auto tmp41 = x1 + 32L*tmp28;
                            auto tmp42 = c10::convert<int64_t>(tmp41);
                            auto tmp43 = at::vec::VectorizedN<int64_t,2>::arange(tmp42, 1);
                            tmp18.store(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
                            atomic_add_vec<float, 2, 1>(out_ptr1, tmp43, tmp40);
                        }
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    float tmp_acc1 = 0;
                    at::vec::Vectorized<float> tmp_acc1_vec = at::vec::Vectorized<float>(0);
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(1L))
                    {
                        {
                            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x0 + 32L*x1), static_cast<int64_t>(16));
                                auto tmp2 = tmp0 * tmp1;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                                tmp_acc1_vec = tmp_acc1_vec + tmp0;
                            }
                        }
                    }
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                    {
                        tmp_acc0_vec.store(out_ptr4 + static_cast<int64_t>(x0));
                        tmp_acc1_vec.store(out_ptr5 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
        #pragma omp single
        {
            {
                for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(512L); x0+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(512L)))
                        {
                            auto tmp0 = static_cast<float>(0.0);
                            auto tmp1 = at::vec::Vectorized<float>(tmp0);
                            tmp1.store(out_ptr6 + static_cast<int64_t>(x0));
                        }
                    }
                }
            }
        }
        #pragma omp single
        {
            {
                #pragma GCC ivdep
                for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(16L); x0+=static_cast<int64_t>(1L))
                {
                    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                            {
                                auto tmp0 = in_ptr6[static_cast<int64_t>(x0)];
                                auto tmp18 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                                auto tmp19 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(512L + x1 + 32L*x0), static_cast<int64_t>(16));
                                auto tmp1 = static_cast<int64_t>(15);
                                auto tmp2 = min_propagate_nan(tmp1, tmp0);
                                auto tmp3 = static_cast<int64_t>(-16);
                                auto tmp4 = max_propagate_nan(tmp3, tmp2);
                                auto tmp5 = 16L;
                                auto tmp6 = c10::convert<int64_t>(tmp5);
                                auto tmp7 = int64_t(static_cast<std::make_unsigned_t<int64_t>>(tmp4) + static_cast<std::make_unsigned_t<int64_t>>(tmp6));
                                auto tmp8 = tmp4 < 0;
                                auto tmp9 = tmp8 ? tmp7 : tmp4;
                                auto tmp10 = static_cast<int64_t>(0);
                                auto tmp11 = tmp0 >= tmp10;
                                auto tmp12 = static_cast<int64_t>(16);
                                auto tmp13 = tmp0 < tmp12;
                                auto tmp14 = decltype(tmp11)(tmp11 & tmp13);
                                auto tmp15 = static_cast<int64_t>(-1);
                                auto tmp16 = tmp0 != tmp15;
                                auto tmp17 = decltype(tmp14)(tmp14 & tmp16);
                                auto tmp20 = tmp18 + tmp19;
                                auto tmp21 = static_cast<float>(0.0);
                                auto tmp22 = at::vec::VecMask<float,1>::from(tmp17);
                                auto tmp23 = at::vec::Vectorized<float>(tmp21);
                                auto tmp24 = decltype(tmp20)::blendv(tmp23, tmp20, inductor_vec_mask_cast<float,1>(tmp22));
                                auto tmp25 = x1 + 32L*tmp9;
                                auto tmp26 = c10::convert<int64_t>(tmp25);
                                auto tmp27 = at::vec::VectorizedN<int64_t,2>::arange(tmp26, 1);
                                atomic_add_vec<float, 2, 1>(out_ptr6, tmp27, tmp24);
                            }
                        }
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        primals_1, primals_4, primals_6, primals_8, primals_10, primals_12, primals_14, primals_16, primals_18, primals_20, primals_22, primals_24, primals_26, primals_28, primals_30, iota, mul, view, bitwise_not, div, view_12, mul_3, view_14, addmm_2, view_16, mul_8, view_18, bitwise_not_1, div_1, view_30, mul_11, view_32, addmm_6, view_34, mul_16, view_36, mm, amax_2, log, convert_element_type, div_4, div_5, permute_37, permute_38, permute_39, div_6, div_7, permute_62, permute_63, permute_64, div_8, tangents_1 = args
        args.clear()
        assert_size_stride_grouped((primals_1, tangents_1, convert_element_type, mm, amax_2, log), ((2, 16), (), (), (32, 64), (32, 1), (32, 1)), ((16, 1), (), (), (64, 1), (1, 1), (1, 1)), 'input')
        buf0 = empty_strided_cpu((32, 1), (1, 32), torch.float32)
        buf1 = mm; del mm  # reuse
        assert_size_stride(view_36, (32, 32), (32, 1), 'input')
        cpp_fused__log_softmax__log_softmax_backward_data_arange_eq_expand_nll_loss_backward_scalar_tensor_view_0(buf1, primals_1, tangents_1, convert_element_type, amax_2, log, buf0)
        del amax_2
        del convert_element_type
        del log
        del tangents_1
        buf2 = empty_strided_cpu((64, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [permute_19, mm_1], Original ATen: [aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf1, (64, 32), (1, 64), 0), view_36, out=buf2)
        del view_36
        assert_size_stride(primals_30, (64, 32), (32, 1), 'input')
        buf3 = empty_strided_cpu((32, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [logits, permute_21, mm_2], Original ATen: [aten.t, aten.mm]
        extern_kernels.mm(buf1, primals_30, out=buf3)
        del buf1
        del primals_30
        assert_size_stride_grouped((primals_28, mul_16, div_4), ((32, ), (2, 16, 32), (2, 16, 1)), ((1, ), (512, 32, 1), (16, 1, 1)), 'input')
        buf4 = reinterpret_tensor(buf0, (2, 16, 1), (16, 1, 32), 0); del buf0  # reuse
        buf5 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf6 = empty_strided_cpu((2, 16, 32), (512, 32, 1), torch.float32)
        buf7 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf8 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_26, (32, 128), (128, 1), 'input')
        cpp_fused_native_layer_norm_backward_view_1(buf3, primals_28, mul_16, div_4, buf4, buf5, buf6, buf7, buf8)
        del buf3
        del buf4
        del div_4
        del mul_16
        del primals_28
        buf9 = empty_strided_cpu((32, 128), (128, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_43, linear_7, permute_23, mm_3], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf6, (32, 32), (32, 1), 0), primals_26, out=buf9)
        del primals_26
        assert_size_stride(view_34, (32, 128), (128, 1), 'input')
        buf10 = empty_strided_cpu((32, 128), (128, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_43, permute_24, mm_4], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf6, (32, 32), (1, 32), 0), view_34, out=buf10)
        del view_34
        buf11 = reinterpret_tensor(buf5, (1, 32), (32, 1), 0); del buf5  # reuse
        assert_size_stride(addmm_6, (32, 128), (128, 1), 'input')
        buf12 = reinterpret_tensor(buf9, (2, 16, 128), (2048, 128, 1), 0); del buf9  # reuse
        assert_size_stride(primals_24, (128, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_gelu_gelu_backward_sum_view_2(buf12, buf6, addmm_6, buf11)
        del addmm_6
        buf13 = empty_strided_cpu((32, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_45, linear_6, gelu_1, mul_28, mul_29, mul_30, exp_4, mul_31, mul_32, add_18, mul_33, view_46, permute_27, mm_5], Original ATen: [aten.view, aten._unsafe_view, aten.gelu, aten.gelu_backward, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf12, (32, 128), (128, 1), 0), primals_24, out=buf13)
        del primals_24
        assert_size_stride(view_32, (32, 32), (32, 1), 'input')
        buf14 = empty_strided_cpu((128, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_45, linear_6, gelu_1, mul_28, mul_29, mul_30, exp_4, mul_31, mul_32, add_18, mul_33, view_46, permute_28, mm_6], Original ATen: [aten.view, aten._unsafe_view, aten.gelu, aten.gelu_backward, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf12, (128, 32), (1, 128), 0), view_32, out=buf14)
        del view_32
        buf15 = empty_strided_cpu((1, 128), (128, 1), torch.float32)
        assert_size_stride_grouped((primals_22, mul_11, div_5), ((32, ), (2, 16, 32), (2, 16, 1)), ((1, ), (512, 32, 1), (16, 1, 1)), 'input')
        buf16 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf17 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf20 = buf6; del buf6  # reuse
        buf18 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf19 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_20, (32, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_add_gelu_gelu_backward_native_layer_norm_backward_sum_view_3(buf20, buf12, buf13, primals_22, mul_11, div_5, buf15, buf16, buf17, buf18, buf19)
        del div_5
        del mul_11
        del primals_22
        buf21 = buf13; del buf13  # reuse
        # Topologically Sorted Source Nodes: [view_49, linear_5, permute_31, mm_7], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf20, (32, 32), (32, 1), 0), primals_20, out=buf21)
        del primals_20
        assert_size_stride(view_30, (32, 32), (32, 1), 'input')
        buf22 = empty_strided_cpu((32, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_49, permute_32, mm_8], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf20, (32, 32), (1, 32), 0), view_30, out=buf22)
        del view_30
        buf23 = reinterpret_tensor(buf17, (1, 32), (32, 1), 0); del buf17  # reuse
        buf24 = empty_strided_cpu((2, 2, 16, 16), (512, 256, 16, 1), torch.float32)
        assert_size_stride(div_1, (2, 2, 16, 16), (512, 256, 16, 1), 'input')
        cpp_fused_clone_sum_transpose_view_4(buf20, buf21, buf23, buf24)
        buf25 = reinterpret_tensor(buf21, (4, 16, 16), (256, 16, 1), 0); del buf21  # reuse
        # Topologically Sorted Source Nodes: [view_51, view_52, permute_35, clone_8, view_53, matmul_3, permute_36, bmm_4], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(div_1, (4, 16, 16), (256, 1, 16), 0), reinterpret_tensor(buf24, (4, 16, 16), (256, 16, 1), 0), out=buf25)
        assert_size_stride(permute_37, (4, 16, 16), (256, 1, 16), 'input')
        buf26 = empty_strided_cpu((4, 16, 16), (256, 16, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_51, view_52, permute_35, clone_8, view_53, bmm_5], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf24, (4, 16, 16), (256, 16, 1), 0), permute_37, out=buf26)
        del permute_37
        buf27 = empty_strided_cpu((2, 2, 16, 1), (32, 16, 1, 64), torch.float32)
        assert_size_stride(bitwise_not_1, (16, 16), (16, 1), 'input')
        buf28 = div_1; del div_1  # reuse
        assert_size_stride(permute_38, (4, 16, 16), (256, 1, 16), 'input')
        cpp_fused__softmax_backward_data_masked_fill_mul_nll_loss_backward_view_5(buf28, buf26, bitwise_not_1, buf27)
        del bitwise_not_1
        buf29 = buf26; del buf26  # reuse
        # Topologically Sorted Source Nodes: [full_default_8, view_55, mul_41, neg_1, fma, where_6, mul_42, view_56, bmm_6], Original ATen: [aten.nll_loss_backward, aten.view, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.bmm]
        extern_kernels.bmm(permute_38, reinterpret_tensor(buf28, (4, 16, 16), (256, 16, 1), 0), out=buf29)
        del permute_38
        assert_size_stride(permute_39, (4, 16, 16), (256, 1, 16), 'input')
        buf30 = reinterpret_tensor(buf24, (4, 16, 16), (256, 16, 1), 0); del buf24  # reuse
        # Topologically Sorted Source Nodes: [full_default_8, view_55, mul_41, neg_1, fma, where_6, mul_42, view_56, bmm_7], Original ATen: [aten.nll_loss_backward, aten.view, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf28, (4, 16, 16), (256, 16, 1), 0), permute_39, out=buf30)
        del buf28
        del permute_39
        buf34 = empty_strided_cpu((2, 16, 96), (1536, 96, 1), torch.float32)
        buf31 = reinterpret_tensor(buf34, (2, 16, 32), (1536, 96, 1), 0)  # alias
        buf32 = reinterpret_tensor(buf34, (2, 16, 32), (1536, 96, 1), 32)  # alias
        buf33 = reinterpret_tensor(buf34, (2, 16, 32), (1536, 96, 1), 64)  # alias
        assert_size_stride(primals_18, (96, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_cat_clone_transpose_view_6(buf30, buf29, buf25, buf31, buf32, buf33)
        del buf31
        del buf32
        del buf33
        buf35 = reinterpret_tensor(buf30, (32, 32), (32, 1), 0); del buf30  # reuse
        # Topologically Sorted Source Nodes: [view_62, linear_4, permute_44, mm_9], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf34, (32, 96), (96, 1), 0), primals_18, out=buf35)
        del primals_18
        assert_size_stride(view_18, (32, 32), (32, 1), 'input')
        buf36 = empty_strided_cpu((96, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_62, permute_45, mm_10], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf34, (96, 32), (1, 96), 0), view_18, out=buf36)
        del view_18
        buf37 = empty_strided_cpu((1, 96), (96, 1), torch.float32)
        assert_size_stride_grouped((primals_16, mul_8, div_6), ((32, ), (2, 16, 32), (2, 16, 1)), ((1, ), (512, 32, 1), (16, 1, 1)), 'input')
        buf38 = buf16; del buf16  # reuse
        buf39 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf42 = buf20; del buf20  # reuse
        buf40 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf41 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_14, (32, 128), (128, 1), 'input')
        cpp_fused_add_native_layer_norm_backward_sum_view_7(buf42, buf34, buf35, primals_16, mul_8, div_6, buf37, buf38, buf39, buf40, buf41)
        del buf34
        del div_6
        del mul_8
        del primals_16
        buf43 = reinterpret_tensor(buf12, (32, 128), (128, 1), 0); del buf12  # reuse
        # Topologically Sorted Source Nodes: [view_65, linear_3, permute_48, mm_11], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf42, (32, 32), (32, 1), 0), primals_14, out=buf43)
        del primals_14
        assert_size_stride(view_16, (32, 128), (128, 1), 'input')
        buf44 = empty_strided_cpu((32, 128), (128, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_65, permute_49, mm_12], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf42, (32, 32), (1, 32), 0), view_16, out=buf44)
        del view_16
        buf45 = reinterpret_tensor(buf39, (1, 32), (32, 1), 0); del buf39  # reuse
        assert_size_stride(addmm_2, (32, 128), (128, 1), 'input')
        buf46 = reinterpret_tensor(buf43, (2, 16, 128), (2048, 128, 1), 0); del buf43  # reuse
        assert_size_stride(primals_12, (128, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_gelu_gelu_backward_sum_view_2(buf46, buf42, addmm_2, buf45)
        del addmm_2
        buf47 = buf35; del buf35  # reuse
        # Topologically Sorted Source Nodes: [view_67, linear_2, gelu, mul_51, mul_52, mul_53, exp_5, mul_54, mul_55, add_22, mul_56, view_68, permute_52, mm_13], Original ATen: [aten.view, aten._unsafe_view, aten.gelu, aten.gelu_backward, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf46, (32, 128), (128, 1), 0), primals_12, out=buf47)
        del primals_12
        assert_size_stride(view_14, (32, 32), (32, 1), 'input')
        buf48 = empty_strided_cpu((128, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_67, linear_2, gelu, mul_51, mul_52, mul_53, exp_5, mul_54, mul_55, add_22, mul_56, view_68, permute_53, mm_14], Original ATen: [aten.view, aten._unsafe_view, aten.gelu, aten.gelu_backward, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf46, (128, 32), (1, 128), 0), view_14, out=buf48)
        del view_14
        buf49 = empty_strided_cpu((1, 128), (128, 1), torch.float32)
        assert_size_stride_grouped((primals_10, mul_3, div_7), ((32, ), (2, 16, 32), (2, 16, 1)), ((1, ), (512, 32, 1), (16, 1, 1)), 'input')
        buf50 = buf38; del buf38  # reuse
        buf51 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf54 = buf42; del buf42  # reuse
        buf52 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf53 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_8, (32, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_add_gelu_gelu_backward_native_layer_norm_backward_sum_view_3(buf54, buf46, buf47, primals_10, mul_3, div_7, buf49, buf50, buf51, buf52, buf53)
        del buf46
        del div_7
        del mul_3
        del primals_10
        buf55 = buf47; del buf47  # reuse
        # Topologically Sorted Source Nodes: [view_71, linear_1, permute_56, mm_15], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf54, (32, 32), (32, 1), 0), primals_8, out=buf55)
        del primals_8
        assert_size_stride(view_12, (32, 32), (32, 1), 'input')
        buf56 = reinterpret_tensor(buf29, (32, 32), (32, 1), 0); del buf29  # reuse
        # Topologically Sorted Source Nodes: [view_71, permute_57, mm_16], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf54, (32, 32), (1, 32), 0), view_12, out=buf56)
        del view_12
        buf57 = reinterpret_tensor(buf51, (1, 32), (32, 1), 0); del buf51  # reuse
        buf58 = reinterpret_tensor(buf25, (2, 2, 16, 16), (512, 256, 16, 1), 0); del buf25  # reuse
        assert_size_stride(div, (2, 2, 16, 16), (512, 256, 16, 1), 'input')
        cpp_fused_clone_sum_transpose_view_4(buf54, buf55, buf57, buf58)
        buf59 = reinterpret_tensor(buf55, (4, 16, 16), (256, 16, 1), 0); del buf55  # reuse
        # Topologically Sorted Source Nodes: [view_73, view_74, permute_60, clone_11, view_75, matmul_1, permute_61, bmm_8], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(div, (4, 16, 16), (256, 1, 16), 0), reinterpret_tensor(buf58, (4, 16, 16), (256, 16, 1), 0), out=buf59)
        assert_size_stride(permute_62, (4, 16, 16), (256, 1, 16), 'input')
        buf60 = empty_strided_cpu((4, 16, 16), (256, 16, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_73, view_74, permute_60, clone_11, view_75, bmm_9], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf58, (4, 16, 16), (256, 16, 1), 0), permute_62, out=buf60)
        del permute_62
        buf61 = buf27; del buf27  # reuse
        assert_size_stride(bitwise_not, (16, 16), (16, 1), 'input')
        buf62 = div; del div  # reuse
        assert_size_stride(permute_63, (4, 16, 16), (256, 1, 16), 'input')
        cpp_fused__softmax_backward_data_masked_fill_mul_nll_loss_backward_view_5(buf62, buf60, bitwise_not, buf61)
        del bitwise_not
        del buf61
        buf63 = buf60; del buf60  # reuse
        # Topologically Sorted Source Nodes: [full_default_8, view_77, mul_64, neg_2, fma_1, where_7, mul_65, view_78, bmm_10], Original ATen: [aten.nll_loss_backward, aten.view, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.bmm]
        extern_kernels.bmm(permute_63, reinterpret_tensor(buf62, (4, 16, 16), (256, 16, 1), 0), out=buf63)
        del permute_63
        assert_size_stride(permute_64, (4, 16, 16), (256, 1, 16), 'input')
        buf64 = reinterpret_tensor(buf58, (4, 16, 16), (256, 16, 1), 0); del buf58  # reuse
        # Topologically Sorted Source Nodes: [full_default_8, view_77, mul_64, neg_2, fma_1, where_7, mul_65, view_78, bmm_11], Original ATen: [aten.nll_loss_backward, aten.view, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf62, (4, 16, 16), (256, 16, 1), 0), permute_64, out=buf64)
        del buf62
        del permute_64
        buf68 = empty_strided_cpu((2, 16, 96), (1536, 96, 1), torch.float32)
        buf65 = reinterpret_tensor(buf68, (2, 16, 32), (1536, 96, 1), 0)  # alias
        buf66 = reinterpret_tensor(buf68, (2, 16, 32), (1536, 96, 1), 32)  # alias
        buf67 = reinterpret_tensor(buf68, (2, 16, 32), (1536, 96, 1), 64)  # alias
        assert_size_stride(primals_6, (96, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_cat_clone_transpose_view_6(buf64, buf63, buf59, buf65, buf66, buf67)
        del buf59
        del buf63
        del buf65
        del buf66
        del buf67
        buf69 = reinterpret_tensor(buf64, (32, 32), (32, 1), 0); del buf64  # reuse
        # Topologically Sorted Source Nodes: [view_84, linear, permute_69, mm_17], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf68, (32, 96), (96, 1), 0), primals_6, out=buf69)
        del primals_6
        assert_size_stride(view, (32, 32), (32, 1), 'input')
        buf70 = empty_strided_cpu((96, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_84, permute_70, mm_18], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf68, (96, 32), (1, 96), 0), view, out=buf70)
        del view
        buf71 = empty_strided_cpu((1, 96), (96, 1), torch.float32)
        buf79 = empty_strided_cpu((64, 32), (32, 1), torch.float32)
        assert_size_stride_grouped((primals_4, mul, div_8), ((32, ), (2, 16, 32), (2, 16, 1)), ((1, ), (512, 32, 1), (16, 1, 1)), 'input')
        buf72 = buf50; del buf50  # reuse
        buf73 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf76 = buf54; del buf54  # reuse
        buf74 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf75 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf77 = empty_strided_cpu((16, 32), (32, 1), torch.float32)
        assert_size_stride(iota, (16, ), (1, ), 'input')
        cpp_fused_add_embedding_dense_backward_native_layer_norm_backward_sum_view_8(buf76, buf68, buf69, primals_4, mul, div_8, primals_1, iota, buf71, buf79, buf72, buf73, buf74, buf75, buf77)
        del buf68
        del buf69
        del buf72
        del buf73
        del buf76
        del div_8
        del iota
        del mul
        del primals_1
        del primals_4
        return (None, buf79, buf77, buf74, buf75, buf70, reinterpret_tensor(buf71, (96, ), (1, ), 0), buf56, reinterpret_tensor(buf57, (32, ), (1, ), 0), buf52, buf53, buf48, reinterpret_tensor(buf49, (128, ), (1, ), 0), buf44, reinterpret_tensor(buf45, (32, ), (1, ), 0), buf40, buf41, buf36, reinterpret_tensor(buf37, (96, ), (1, ), 0), buf22, reinterpret_tensor(buf23, (32, ), (1, ), 0), buf18, buf19, buf14, reinterpret_tensor(buf15, (128, ), (1, ), 0), buf10, reinterpret_tensor(buf11, (32, ), (1, ), 0), buf7, buf8, buf2, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    primals_1 = rand_strided((2, 16), (16, 1), device='cpu', dtype=torch.int64)
    primals_4 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_6 = rand_strided((96, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_8 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_10 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_12 = rand_strided((128, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_14 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    primals_16 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_18 = rand_strided((96, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_20 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_22 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_24 = rand_strided((128, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_26 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    primals_28 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_30 = rand_strided((64, 32), (32, 1), device='cpu', dtype=torch.float32)
    iota = rand_strided((16, ), (1, ), device='cpu', dtype=torch.int64)
    mul = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    bitwise_not = rand_strided((16, 16), (16, 1), device='cpu', dtype=torch.bool)
    div = rand_strided((2, 2, 16, 16), (512, 256, 16, 1), device='cpu', dtype=torch.float32)
    view_12 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    mul_3 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view_14 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    addmm_2 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    view_16 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    mul_8 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view_18 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    bitwise_not_1 = rand_strided((16, 16), (16, 1), device='cpu', dtype=torch.bool)
    div_1 = rand_strided((2, 2, 16, 16), (512, 256, 16, 1), device='cpu', dtype=torch.float32)
    view_30 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    mul_11 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view_32 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    addmm_6 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    view_34 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    mul_16 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view_36 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    mm = rand_strided((32, 64), (64, 1), device='cpu', dtype=torch.float32)
    amax_2 = rand_strided((32, 1), (1, 1), device='cpu', dtype=torch.float32)
    log = rand_strided((32, 1), (1, 1), device='cpu', dtype=torch.float32)
    convert_element_type = rand_strided((), (), device='cpu', dtype=torch.float32)
    div_4 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    div_5 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    permute_37 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    permute_38 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    permute_39 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    div_6 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    div_7 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    permute_62 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    permute_63 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    permute_64 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    div_8 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    tangents_1 = rand_strided((), (), device='cpu', dtype=torch.float32)
    return [primals_1, primals_4, primals_6, primals_8, primals_10, primals_12, primals_14, primals_16, primals_18, primals_20, primals_22, primals_24, primals_26, primals_28, primals_30, iota, mul, view, bitwise_not, div, view_12, mul_3, view_14, addmm_2, view_16, mul_8, view_18, bitwise_not_1, div_1, view_30, mul_11, view_32, addmm_6, view_34, mul_16, view_36, mm, amax_2, log, convert_element_type, div_4, div_5, permute_37, permute_38, permute_39, div_6, div_7, permute_62, permute_63, permute_64, div_8, tangents_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cpu')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
