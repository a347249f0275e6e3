# AOT ID: ['8_backward']
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


cpp_fused_native_dropout_backward_native_layer_norm_backward_view_1 = async_compile.cpp_pybinding(['const float*', 'const float*', 'const float*', 'const float*', 'const bool*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const bool* in_ptr4,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4,
                       float* out_ptr5)
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
                            auto tmp17 = at::vec::VecMask<float,1>::from(in_ptr4 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
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
                            auto tmp18 = tmp17.to<float,1>();
                            auto tmp19 = static_cast<float>(1.1111111111111112);
                            auto tmp20 = at::vec::Vectorized<float>(tmp19);
                            auto tmp21 = tmp18 * tmp20;
                            auto tmp22 = tmp16 * tmp21;
                            tmp16.store(out_ptr2 + static_cast<int64_t>(x1 + 32L*x0));
                            tmp22.store(out_ptr3 + static_cast<int64_t>(x1 + 32L*x0));
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
                        tmp_acc0_vec.store(out_ptr4 + static_cast<int64_t>(x0));
                        tmp_acc1_vec.store(out_ptr5 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__unsafe_view_gelu_gelu_backward_native_dropout_backward_sum_view_2 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'float*'], r'''
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


cpp_fused__unsafe_view_add_gelu_gelu_backward_native_dropout_backward_native_layer_norm_backward_sum_view_3 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const bool*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const bool* in_ptr5,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4,
                       float* out_ptr5)
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
                            auto tmp19 = at::vec::VecMask<float,1>::from(in_ptr5 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
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
                            auto tmp20 = tmp19.to<float,1>();
                            auto tmp21 = static_cast<float>(1.1111111111111112);
                            auto tmp22 = at::vec::Vectorized<float>(tmp21);
                            auto tmp23 = tmp20 * tmp22;
                            auto tmp24 = tmp18 * tmp23;
                            tmp18.store(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
                            tmp24.store(out_ptr3 + static_cast<int64_t>(x1 + 32L*x0));
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
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused_clone_native_dropout_backward_sum_transpose_view_4 = async_compile.cpp_pybinding(['const float*', 'const float*', 'float*', 'float*'], r'''
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


cpp_fused__softmax_backward_data_masked_fill_mul_native_dropout_backward_nll_loss_backward_view_5 = async_compile.cpp_pybinding(['float*', 'const float*', 'const bool*', 'const bool*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const bool* in_ptr1,
                       const bool* in_ptr3,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    auto in_ptr2 = in_out_ptr0;
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
                                auto tmp1 = at::vec::VecMask<float,1>::from(in_ptr1 + static_cast<int64_t>(x1 + 16L*x0), static_cast<int64_t>(16));
                                auto tmp7 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1 + 16L*x0), static_cast<int64_t>(16));
                                auto tmp2 = tmp1.to<float,1>();
                                auto tmp3 = static_cast<float>(1.1111111111111112);
                                auto tmp4 = at::vec::Vectorized<float>(tmp3);
                                auto tmp5 = tmp2 * tmp4;
                                auto tmp6 = tmp0 * tmp5;
                                auto tmp8 = tmp6 * tmp7;
                                tmp_acc0_vec = tmp_acc0_vec + tmp8;
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
                                auto tmp0 = at::vec::VecMask<float,1>::from(in_ptr3 + static_cast<int64_t>(x2 + 16L*x1), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0), static_cast<int64_t>(16));
                                auto tmp3 = out_ptr0[static_cast<int64_t>(x1 + 16L*x0)];
                                auto tmp4 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0), static_cast<int64_t>(16));
                                auto tmp5 = at::vec::VecMask<float,1>::from(in_ptr1 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0), static_cast<int64_t>(16));
                                auto tmp2 = tmp1.neg();
                                auto tmp6 = tmp5.to<float,1>();
                                auto tmp7 = static_cast<float>(1.1111111111111112);
                                auto tmp8 = at::vec::Vectorized<float>(tmp7);
                                auto tmp9 = tmp6 * tmp8;
                                auto tmp10 = tmp4 * tmp9;
                                auto tmp11 = tmp10 * tmp1;
                                auto tmp12 = at::vec::Vectorized<float>(tmp3);
                                auto tmp13 = fmadd(tmp2, tmp12, tmp11);
                                auto tmp14 = static_cast<float>(0.0);
                                auto tmp15 = at::vec::Vectorized<float>(tmp14);
                                auto tmp16 = decltype(tmp15)::blendv(tmp13, tmp15, inductor_vec_mask_cast<float,1>(tmp0));
                                auto tmp17 = static_cast<float>(0.25);
                                auto tmp18 = at::vec::Vectorized<float>(tmp17);
                                auto tmp19 = tmp16 * tmp18;
                                tmp19.store(in_out_ptr0 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0));
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


cpp_fused_add_native_dropout_backward_native_layer_norm_backward_sum_view_7 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const bool*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const bool* in_ptr5,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4,
                       float* out_ptr5)
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
                            auto tmp19 = at::vec::VecMask<float,1>::from(in_ptr5 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
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
                            auto tmp20 = tmp19.to<float,1>();
                            auto tmp21 = static_cast<float>(1.1111111111111112);
                            auto tmp22 = at::vec::Vectorized<float>(tmp21);
                            auto tmp23 = tmp20 * tmp22;
                            auto tmp24 = tmp18 * tmp23;
                            tmp18.store(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
                            tmp24.store(out_ptr3 + static_cast<int64_t>(x1 + 32L*x0));
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
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused_add_embedding_dense_backward_native_dropout_backward_native_layer_norm_backward_sum_view_8 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const bool*', 'const int64_t*', 'const int64_t*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const bool* in_ptr5,
                       const int64_t* in_ptr6,
                       const int64_t* in_ptr7,
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
                            auto tmp19 = at::vec::VecMask<float,1>::from(in_ptr5 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp25 = in_ptr6[static_cast<int64_t>(x0)];
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
                            auto tmp20 = tmp19.to<float,1>();
                            auto tmp21 = static_cast<float>(1.1111111111111112);
                            auto tmp22 = at::vec::Vectorized<float>(tmp21);
                            auto tmp23 = tmp20 * tmp22;
                            auto tmp24 = tmp18 * tmp23;
                            auto tmp26 = static_cast<int64_t>(63);
                            auto tmp27 = min_propagate_nan(tmp26, tmp25);
                            auto tmp28 = static_cast<int64_t>(-64);
                            auto tmp29 = max_propagate_nan(tmp28, tmp27);
                            auto tmp30 = 64L;
                            auto tmp31 = c10::convert<int64_t>(tmp30);
                            auto tmp32 = int64_t(static_cast<std::make_unsigned_t<int64_t>>(tmp29) + static_cast<std::make_unsigned_t<int64_t>>(tmp31));
                            auto tmp33 = tmp29 < 0;
                            auto tmp34 = tmp33 ? tmp32 : tmp29;
                            auto tmp35 = static_cast<int64_t>(0);
                            auto tmp36 = tmp25 >= tmp35;
                            auto tmp37 = static_cast<int64_t>(64);
                            auto tmp38 = tmp25 < tmp37;
                            auto tmp39 = decltype(tmp36)(tmp36 & tmp38);
                            auto tmp40 = static_cast<int64_t>(-1);
                            auto tmp41 = tmp25 != tmp40;
                            auto tmp42 = decltype(tmp39)(tmp39 & tmp41);
                            auto tmp43 = static_cast<float>(0.0);
                            auto tmp44 = at::vec::VecMask<float,1>::from(tmp42);
                            auto tmp45 = at::vec::Vectorized<float>(tmp43);
                            auto tmp46 = decltype(tmp24)::blendv(tmp45, tmp24, inductor_vec_mask_cast<float,1>(tmp44));
                            auto tmp47 = x1 + 32L*tmp34;
                            auto tmp48 = c10::convert<int64_t>(tmp47);
                            auto tmp49 = at::vec::VectorizedN<int64_t,2>::arange(tmp48, 1);
                            tmp24.store(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
                            atomic_add_vec<float, 2, 1>(out_ptr1, tmp49, tmp46);
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
                                auto tmp0 = in_ptr7[static_cast<int64_t>(x0)];
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
        primals_1, primals_4, primals_6, primals_8, primals_10, primals_12, primals_14, primals_16, primals_18, primals_20, primals_22, primals_24, primals_26, primals_28, primals_30, iota, gt, mul_2, view, bitwise_not, div, gt_1, view_12, gt_2, mul_9, view_14, addmm_2, view_16, gt_3, mul_16, view_18, bitwise_not_1, div_1, gt_4, view_30, gt_5, mul_23, view_32, addmm_6, view_34, gt_6, mul_30, view_36, mm, amax_2, log, convert_element_type, div_4, div_5, permute_36, permute_37, permute_38, permute_39, div_6, div_7, permute_61, permute_62, permute_63, permute_64, div_8, tangents_1 = args
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
        assert_size_stride_grouped((primals_28, mul_30, div_4, gt_6), ((32, ), (2, 16, 32), (2, 16, 1), (2, 16, 32)), ((1, ), (512, 32, 1), (16, 1, 1), (512, 32, 1)), 'input')
        buf4 = reinterpret_tensor(buf0, (2, 16, 1), (16, 1, 32), 0); del buf0  # reuse
        buf5 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf6 = empty_strided_cpu((2, 16, 32), (512, 32, 1), torch.float32)
        buf9 = empty_strided_cpu((2, 16, 32), (512, 32, 1), torch.float32)
        buf7 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf8 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_26, (32, 128), (128, 1), 'input')
        cpp_fused_native_dropout_backward_native_layer_norm_backward_view_1(buf3, primals_28, mul_30, div_4, gt_6, buf4, buf5, buf6, buf9, buf7, buf8)
        del buf3
        del buf4
        del buf5
        del div_4
        del gt_6
        del mul_30
        del primals_28
        buf10 = empty_strided_cpu((32, 128), (128, 1), torch.float32)
        # Topologically Sorted Source Nodes: [convert_element_type_1, mul_41, mul_42, view_43, linear_7, permute_23, mm_3], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf9, (32, 32), (32, 1), 0), primals_26, out=buf10)
        del primals_26
        assert_size_stride(view_34, (32, 128), (128, 1), 'input')
        buf11 = empty_strided_cpu((32, 128), (128, 1), torch.float32)
        # Topologically Sorted Source Nodes: [convert_element_type_1, mul_41, mul_42, view_43, permute_24, mm_4], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf9, (32, 32), (1, 32), 0), view_34, out=buf11)
        del view_34
        buf12 = empty_strided_cpu((1, 32), (32, 1), torch.float32)
        assert_size_stride(addmm_6, (32, 128), (128, 1), 'input')
        buf13 = reinterpret_tensor(buf10, (2, 16, 128), (2048, 128, 1), 0); del buf10  # reuse
        assert_size_stride(primals_24, (128, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_gelu_gelu_backward_native_dropout_backward_sum_view_2(buf13, buf9, addmm_6, buf12)
        del addmm_6
        buf14 = reinterpret_tensor(buf9, (32, 32), (32, 1), 0); del buf9  # reuse
        # Topologically Sorted Source Nodes: [view_45, linear_6, gelu_1, mul_44, mul_45, mul_46, exp_4, mul_47, mul_48, add_18, mul_49, view_46, permute_27, mm_5], Original ATen: [aten.view, aten._unsafe_view, aten.gelu, aten.gelu_backward, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf13, (32, 128), (128, 1), 0), primals_24, out=buf14)
        del primals_24
        assert_size_stride(view_32, (32, 32), (32, 1), 'input')
        buf15 = empty_strided_cpu((128, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_45, linear_6, gelu_1, mul_44, mul_45, mul_46, exp_4, mul_47, mul_48, add_18, mul_49, view_46, permute_28, mm_6], Original ATen: [aten.view, aten._unsafe_view, aten.gelu, aten.gelu_backward, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf13, (128, 32), (1, 128), 0), view_32, out=buf15)
        del view_32
        buf16 = empty_strided_cpu((1, 128), (128, 1), torch.float32)
        assert_size_stride_grouped((primals_22, mul_23, div_5, gt_5), ((32, ), (2, 16, 32), (2, 16, 1), (2, 16, 32)), ((1, ), (512, 32, 1), (16, 1, 1), (512, 32, 1)), 'input')
        buf17 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf18 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf21 = buf6; del buf6  # reuse
        buf22 = empty_strided_cpu((2, 16, 32), (512, 32, 1), torch.float32)
        buf19 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf20 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_20, (32, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_add_gelu_gelu_backward_native_dropout_backward_native_layer_norm_backward_sum_view_3(buf21, buf13, buf14, primals_22, mul_23, div_5, gt_5, buf16, buf17, buf18, buf22, buf19, buf20)
        del div_5
        del gt_5
        del mul_23
        del primals_22
        buf23 = buf14; del buf14  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_2, mul_57, mul_58, view_49, linear_5, permute_31, mm_7], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf22, (32, 32), (32, 1), 0), primals_20, out=buf23)
        del primals_20
        assert_size_stride(view_30, (32, 32), (32, 1), 'input')
        buf24 = empty_strided_cpu((32, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [convert_element_type_2, mul_57, mul_58, view_49, permute_32, mm_8], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf22, (32, 32), (1, 32), 0), view_30, out=buf24)
        del view_30
        buf25 = reinterpret_tensor(buf18, (1, 32), (32, 1), 0); del buf18  # reuse
        buf26 = empty_strided_cpu((2, 2, 16, 16), (512, 256, 16, 1), torch.float32)
        assert_size_stride(permute_36, (4, 16, 16), (256, 1, 16), 'input')
        cpp_fused_clone_native_dropout_backward_sum_transpose_view_4(buf22, buf23, buf25, buf26)
        buf27 = reinterpret_tensor(buf23, (4, 16, 16), (256, 16, 1), 0); del buf23  # reuse
        # Topologically Sorted Source Nodes: [view_51, view_52, permute_35, clone_10, view_53, bmm_4], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.bmm]
        extern_kernels.bmm(permute_36, reinterpret_tensor(buf26, (4, 16, 16), (256, 16, 1), 0), out=buf27)
        del permute_36
        assert_size_stride(permute_37, (4, 16, 16), (256, 1, 16), 'input')
        buf28 = reinterpret_tensor(buf22, (4, 16, 16), (256, 16, 1), 0); del buf22  # reuse
        # Topologically Sorted Source Nodes: [view_51, view_52, permute_35, clone_10, view_53, bmm_5], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf26, (4, 16, 16), (256, 16, 1), 0), permute_37, out=buf28)
        del permute_37
        assert_size_stride_grouped((gt_4, div_1), ((2, 2, 16, 16), (2, 2, 16, 16)), ((512, 256, 16, 1), (512, 256, 16, 1)), 'input')
        buf29 = empty_strided_cpu((2, 2, 16, 1), (32, 16, 1, 64), torch.float32)
        assert_size_stride(bitwise_not_1, (16, 16), (16, 1), 'input')
        buf30 = div_1; del div_1  # reuse
        assert_size_stride(permute_38, (4, 16, 16), (256, 1, 16), 'input')
        cpp_fused__softmax_backward_data_masked_fill_mul_native_dropout_backward_nll_loss_backward_view_5(buf30, buf28, gt_4, bitwise_not_1, buf29)
        del bitwise_not_1
        del gt_4
        buf31 = buf28; del buf28  # reuse
        # Topologically Sorted Source Nodes: [full_default_8, view_55, convert_element_type_3, mul_59, mul_60, mul_61, neg_1, fma, where_6, mul_62, view_56, bmm_6], Original ATen: [aten.nll_loss_backward, aten.view, aten.native_dropout_backward, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.bmm]
        extern_kernels.bmm(permute_38, reinterpret_tensor(buf30, (4, 16, 16), (256, 16, 1), 0), out=buf31)
        del permute_38
        assert_size_stride(permute_39, (4, 16, 16), (256, 1, 16), 'input')
        buf32 = reinterpret_tensor(buf26, (4, 16, 16), (256, 16, 1), 0); del buf26  # reuse
        # Topologically Sorted Source Nodes: [full_default_8, view_55, convert_element_type_3, mul_59, mul_60, mul_61, neg_1, fma, where_6, mul_62, view_56, bmm_7], Original ATen: [aten.nll_loss_backward, aten.view, aten.native_dropout_backward, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf30, (4, 16, 16), (256, 16, 1), 0), permute_39, out=buf32)
        del buf30
        del permute_39
        buf36 = empty_strided_cpu((2, 16, 96), (1536, 96, 1), torch.float32)
        buf33 = reinterpret_tensor(buf36, (2, 16, 32), (1536, 96, 1), 0)  # alias
        buf34 = reinterpret_tensor(buf36, (2, 16, 32), (1536, 96, 1), 32)  # alias
        buf35 = reinterpret_tensor(buf36, (2, 16, 32), (1536, 96, 1), 64)  # alias
        assert_size_stride(primals_18, (96, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_cat_clone_transpose_view_6(buf32, buf31, buf27, buf33, buf34, buf35)
        del buf33
        del buf34
        del buf35
        buf37 = reinterpret_tensor(buf32, (32, 32), (32, 1), 0); del buf32  # reuse
        # Topologically Sorted Source Nodes: [view_62, linear_4, permute_44, mm_9], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf36, (32, 96), (96, 1), 0), primals_18, out=buf37)
        del primals_18
        assert_size_stride(view_18, (32, 32), (32, 1), 'input')
        buf38 = empty_strided_cpu((96, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_62, permute_45, mm_10], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf36, (96, 32), (1, 96), 0), view_18, out=buf38)
        del view_18
        buf39 = empty_strided_cpu((1, 96), (96, 1), torch.float32)
        assert_size_stride_grouped((primals_16, mul_16, div_6, gt_3), ((32, ), (2, 16, 32), (2, 16, 1), (2, 16, 32)), ((1, ), (512, 32, 1), (16, 1, 1), (512, 32, 1)), 'input')
        buf40 = buf17; del buf17  # reuse
        buf41 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf44 = buf21; del buf21  # reuse
        buf45 = reinterpret_tensor(buf31, (2, 16, 32), (512, 32, 1), 0); del buf31  # reuse
        buf42 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf43 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_14, (32, 128), (128, 1), 'input')
        cpp_fused_add_native_dropout_backward_native_layer_norm_backward_sum_view_7(buf44, buf36, buf37, primals_16, mul_16, div_6, gt_3, buf39, buf40, buf41, buf45, buf42, buf43)
        del div_6
        del gt_3
        del mul_16
        del primals_16
        buf46 = reinterpret_tensor(buf13, (32, 128), (128, 1), 0); del buf13  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_4, mul_70, mul_71, view_65, linear_3, permute_48, mm_11], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf45, (32, 32), (32, 1), 0), primals_14, out=buf46)
        del primals_14
        assert_size_stride(view_16, (32, 128), (128, 1), 'input')
        buf47 = empty_strided_cpu((32, 128), (128, 1), torch.float32)
        # Topologically Sorted Source Nodes: [convert_element_type_4, mul_70, mul_71, view_65, permute_49, mm_12], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf45, (32, 32), (1, 32), 0), view_16, out=buf47)
        del view_16
        buf48 = reinterpret_tensor(buf41, (1, 32), (32, 1), 0); del buf41  # reuse
        assert_size_stride(addmm_2, (32, 128), (128, 1), 'input')
        buf49 = reinterpret_tensor(buf46, (2, 16, 128), (2048, 128, 1), 0); del buf46  # reuse
        assert_size_stride(primals_12, (128, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_gelu_gelu_backward_native_dropout_backward_sum_view_2(buf49, buf45, addmm_2, buf48)
        del addmm_2
        buf50 = reinterpret_tensor(buf45, (32, 32), (32, 1), 0); del buf45  # reuse
        # Topologically Sorted Source Nodes: [view_67, linear_2, gelu, mul_73, mul_74, mul_75, exp_5, mul_76, mul_77, add_22, mul_78, view_68, permute_52, mm_13], Original ATen: [aten.view, aten._unsafe_view, aten.gelu, aten.gelu_backward, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf49, (32, 128), (128, 1), 0), primals_12, out=buf50)
        del primals_12
        assert_size_stride(view_14, (32, 32), (32, 1), 'input')
        buf51 = empty_strided_cpu((128, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_67, linear_2, gelu, mul_73, mul_74, mul_75, exp_5, mul_76, mul_77, add_22, mul_78, view_68, permute_53, mm_14], Original ATen: [aten.view, aten._unsafe_view, aten.gelu, aten.gelu_backward, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf49, (128, 32), (1, 128), 0), view_14, out=buf51)
        del view_14
        buf52 = empty_strided_cpu((1, 128), (128, 1), torch.float32)
        assert_size_stride_grouped((primals_10, mul_9, div_7, gt_2), ((32, ), (2, 16, 32), (2, 16, 1), (2, 16, 32)), ((1, ), (512, 32, 1), (16, 1, 1), (512, 32, 1)), 'input')
        buf53 = buf40; del buf40  # reuse
        buf54 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf57 = buf44; del buf44  # reuse
        buf58 = reinterpret_tensor(buf37, (2, 16, 32), (512, 32, 1), 0); del buf37  # reuse
        buf55 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf56 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_8, (32, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_add_gelu_gelu_backward_native_dropout_backward_native_layer_norm_backward_sum_view_3(buf57, buf49, buf50, primals_10, mul_9, div_7, gt_2, buf52, buf53, buf54, buf58, buf55, buf56)
        del buf49
        del div_7
        del gt_2
        del mul_9
        del primals_10
        buf59 = buf50; del buf50  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_5, mul_86, mul_87, view_71, linear_1, permute_56, mm_15], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf58, (32, 32), (32, 1), 0), primals_8, out=buf59)
        del primals_8
        assert_size_stride(view_12, (32, 32), (32, 1), 'input')
        buf60 = reinterpret_tensor(buf27, (32, 32), (32, 1), 0); del buf27  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_5, mul_86, mul_87, view_71, permute_57, mm_16], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf58, (32, 32), (1, 32), 0), view_12, out=buf60)
        del view_12
        buf61 = reinterpret_tensor(buf54, (1, 32), (32, 1), 0); del buf54  # reuse
        buf62 = empty_strided_cpu((2, 2, 16, 16), (512, 256, 16, 1), torch.float32)
        assert_size_stride(permute_61, (4, 16, 16), (256, 1, 16), 'input')
        cpp_fused_clone_native_dropout_backward_sum_transpose_view_4(buf58, buf59, buf61, buf62)
        buf63 = reinterpret_tensor(buf59, (4, 16, 16), (256, 16, 1), 0); del buf59  # reuse
        # Topologically Sorted Source Nodes: [view_73, view_74, permute_60, clone_16, view_75, bmm_8], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.bmm]
        extern_kernels.bmm(permute_61, reinterpret_tensor(buf62, (4, 16, 16), (256, 16, 1), 0), out=buf63)
        del permute_61
        assert_size_stride(permute_62, (4, 16, 16), (256, 1, 16), 'input')
        buf64 = reinterpret_tensor(buf58, (4, 16, 16), (256, 16, 1), 0); del buf58  # reuse
        # Topologically Sorted Source Nodes: [view_73, view_74, permute_60, clone_16, view_75, bmm_9], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf62, (4, 16, 16), (256, 16, 1), 0), permute_62, out=buf64)
        del permute_62
        assert_size_stride_grouped((gt_1, div), ((2, 2, 16, 16), (2, 2, 16, 16)), ((512, 256, 16, 1), (512, 256, 16, 1)), 'input')
        buf65 = buf29; del buf29  # reuse
        assert_size_stride(bitwise_not, (16, 16), (16, 1), 'input')
        buf66 = div; del div  # reuse
        assert_size_stride(permute_63, (4, 16, 16), (256, 1, 16), 'input')
        cpp_fused__softmax_backward_data_masked_fill_mul_native_dropout_backward_nll_loss_backward_view_5(buf66, buf64, gt_1, bitwise_not, buf65)
        del bitwise_not
        del buf65
        del gt_1
        buf67 = buf64; del buf64  # reuse
        # Topologically Sorted Source Nodes: [full_default_8, view_77, convert_element_type_6, mul_88, mul_89, mul_90, neg_2, fma_1, where_7, mul_91, view_78, bmm_10], Original ATen: [aten.nll_loss_backward, aten.view, aten.native_dropout_backward, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.bmm]
        extern_kernels.bmm(permute_63, reinterpret_tensor(buf66, (4, 16, 16), (256, 16, 1), 0), out=buf67)
        del permute_63
        assert_size_stride(permute_64, (4, 16, 16), (256, 1, 16), 'input')
        buf68 = reinterpret_tensor(buf62, (4, 16, 16), (256, 16, 1), 0); del buf62  # reuse
        # Topologically Sorted Source Nodes: [full_default_8, view_77, convert_element_type_6, mul_88, mul_89, mul_90, neg_2, fma_1, where_7, mul_91, view_78, bmm_11], Original ATen: [aten.nll_loss_backward, aten.view, aten.native_dropout_backward, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf66, (4, 16, 16), (256, 16, 1), 0), permute_64, out=buf68)
        del buf66
        del permute_64
        buf72 = buf36; del buf36  # reuse
        buf69 = reinterpret_tensor(buf72, (2, 16, 32), (1536, 96, 1), 0)  # alias
        buf70 = reinterpret_tensor(buf72, (2, 16, 32), (1536, 96, 1), 32)  # alias
        buf71 = reinterpret_tensor(buf72, (2, 16, 32), (1536, 96, 1), 64)  # alias
        assert_size_stride(primals_6, (96, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_cat_clone_transpose_view_6(buf68, buf67, buf63, buf69, buf70, buf71)
        del buf63
        del buf67
        del buf69
        del buf70
        del buf71
        buf73 = reinterpret_tensor(buf68, (32, 32), (32, 1), 0); del buf68  # reuse
        # Topologically Sorted Source Nodes: [view_84, linear, permute_69, mm_17], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf72, (32, 96), (96, 1), 0), primals_6, out=buf73)
        del primals_6
        assert_size_stride(view, (32, 32), (32, 1), 'input')
        buf74 = empty_strided_cpu((96, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_84, permute_70, mm_18], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf72, (96, 32), (1, 96), 0), view, out=buf74)
        del view
        buf75 = empty_strided_cpu((1, 96), (96, 1), torch.float32)
        buf83 = empty_strided_cpu((64, 32), (32, 1), torch.float32)
        assert_size_stride_grouped((primals_4, mul_2, div_8, gt), ((32, ), (2, 16, 32), (2, 16, 1), (2, 16, 32)), ((1, ), (512, 32, 1), (16, 1, 1), (512, 32, 1)), 'input')
        buf76 = buf53; del buf53  # reuse
        buf77 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf80 = buf57; del buf57  # reuse
        buf78 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf79 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf81 = empty_strided_cpu((16, 32), (32, 1), torch.float32)
        assert_size_stride(iota, (16, ), (1, ), 'input')
        cpp_fused_add_embedding_dense_backward_native_dropout_backward_native_layer_norm_backward_sum_view_8(buf80, buf72, buf73, primals_4, mul_2, div_8, gt, primals_1, iota, buf75, buf83, buf76, buf77, buf78, buf79, buf81)
        del buf72
        del buf73
        del buf76
        del buf77
        del buf80
        del div_8
        del gt
        del iota
        del mul_2
        del primals_1
        del primals_4
        return (None, buf83, buf81, buf78, buf79, buf74, reinterpret_tensor(buf75, (96, ), (1, ), 0), buf60, reinterpret_tensor(buf61, (32, ), (1, ), 0), buf55, buf56, buf51, reinterpret_tensor(buf52, (128, ), (1, ), 0), buf47, reinterpret_tensor(buf48, (32, ), (1, ), 0), buf42, buf43, buf38, reinterpret_tensor(buf39, (96, ), (1, ), 0), buf24, reinterpret_tensor(buf25, (32, ), (1, ), 0), buf19, buf20, buf15, reinterpret_tensor(buf16, (128, ), (1, ), 0), buf11, reinterpret_tensor(buf12, (32, ), (1, ), 0), buf7, buf8, buf2, )

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
    gt = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.bool)
    mul_2 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    bitwise_not = rand_strided((16, 16), (16, 1), device='cpu', dtype=torch.bool)
    div = rand_strided((2, 2, 16, 16), (512, 256, 16, 1), device='cpu', dtype=torch.float32)
    gt_1 = rand_strided((2, 2, 16, 16), (512, 256, 16, 1), device='cpu', dtype=torch.bool)
    view_12 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    gt_2 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.bool)
    mul_9 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view_14 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    addmm_2 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    view_16 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    gt_3 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.bool)
    mul_16 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view_18 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    bitwise_not_1 = rand_strided((16, 16), (16, 1), device='cpu', dtype=torch.bool)
    div_1 = rand_strided((2, 2, 16, 16), (512, 256, 16, 1), device='cpu', dtype=torch.float32)
    gt_4 = rand_strided((2, 2, 16, 16), (512, 256, 16, 1), device='cpu', dtype=torch.bool)
    view_30 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    gt_5 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.bool)
    mul_23 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view_32 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    addmm_6 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    view_34 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    gt_6 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.bool)
    mul_30 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view_36 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    mm = rand_strided((32, 64), (64, 1), device='cpu', dtype=torch.float32)
    amax_2 = rand_strided((32, 1), (1, 1), device='cpu', dtype=torch.float32)
    log = rand_strided((32, 1), (1, 1), device='cpu', dtype=torch.float32)
    convert_element_type = rand_strided((), (), device='cpu', dtype=torch.float32)
    div_4 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    div_5 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    permute_36 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    permute_37 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    permute_38 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    permute_39 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    div_6 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    div_7 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    permute_61 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    permute_62 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    permute_63 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    permute_64 = rand_strided((4, 16, 16), (256, 1, 16), device='cpu', dtype=torch.float32)
    div_8 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    tangents_1 = rand_strided((), (), device='cpu', dtype=torch.float32)
    return [primals_1, primals_4, primals_6, primals_8, primals_10, primals_12, primals_14, primals_16, primals_18, primals_20, primals_22, primals_24, primals_26, primals_28, primals_30, iota, gt, mul_2, view, bitwise_not, div, gt_1, view_12, gt_2, mul_9, view_14, addmm_2, view_16, gt_3, mul_16, view_18, bitwise_not_1, div_1, gt_4, view_30, gt_5, mul_23, view_32, addmm_6, view_34, gt_6, mul_30, view_36, mm, amax_2, log, convert_element_type, div_4, div_5, permute_36, permute_37, permute_38, permute_39, div_6, div_7, permute_61, permute_62, permute_63, permute_64, div_8, tangents_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cpu')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
