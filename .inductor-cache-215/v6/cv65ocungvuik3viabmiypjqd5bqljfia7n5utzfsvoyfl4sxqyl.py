# AOT ID: ['9_backward']
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


cpp_fused_native_layer_norm_2 = async_compile.cpp_pybinding(['const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
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
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(1L))
            {
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                        {
                            auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp1 = in_ptr1[static_cast<int64_t>(x0)];
                            auto tmp4 = in_ptr2[static_cast<int64_t>(x0)];
                            auto tmp7 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp9 = at::vec::Vectorized<float>::loadu(in_ptr4 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp2 = at::vec::Vectorized<float>(tmp1);
                            auto tmp3 = tmp0 - tmp2;
                            auto tmp5 = at::vec::Vectorized<float>(tmp4);
                            auto tmp6 = tmp3 * tmp5;
                            auto tmp8 = tmp6 * tmp7;
                            auto tmp10 = tmp8 + tmp9;
                            tmp10.store(out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
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


cpp_fused__unsafe_view_gelu_gelu_backward_view_3 = async_compile.cpp_pybinding(['float*', 'const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(4096L); x0+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(4096L)))
                    {
                        auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp12 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp1 = static_cast<float>(0.5);
                        auto tmp2 = at::vec::Vectorized<float>(tmp1);
                        auto tmp3 = tmp0 * tmp2;
                        auto tmp4 = static_cast<float>(0.7071067811865476);
                        auto tmp5 = at::vec::Vectorized<float>(tmp4);
                        auto tmp6 = tmp0 * tmp5;
                        auto tmp7 = tmp6.erf();
                        auto tmp8 = static_cast<float>(1.0);
                        auto tmp9 = at::vec::Vectorized<float>(tmp8);
                        auto tmp10 = tmp7 + tmp9;
                        auto tmp11 = tmp3 * tmp10;
                        auto tmp13 = tmp10 * tmp2;
                        auto tmp14 = tmp0 * tmp0;
                        auto tmp15 = static_cast<float>(-0.5);
                        auto tmp16 = at::vec::Vectorized<float>(tmp15);
                        auto tmp17 = tmp14 * tmp16;
                        auto tmp18 = tmp17.exp();
                        auto tmp19 = static_cast<float>(0.3989422804014327);
                        auto tmp20 = at::vec::Vectorized<float>(tmp19);
                        auto tmp21 = tmp18 * tmp20;
                        auto tmp22 = tmp0 * tmp21;
                        auto tmp23 = tmp13 + tmp22;
                        auto tmp24 = tmp12 * tmp23;
                        tmp11.store(out_ptr0 + static_cast<int64_t>(x0));
                        tmp24.store(in_out_ptr0 + static_cast<int64_t>(x0));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused_native_dropout_backward_sum_view_4 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
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
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__unsafe_view_add_gelu_gelu_backward_native_dropout_backward_native_layer_norm_native_layer_norm_backward_sum_view_5 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const bool*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const float* in_ptr5,
                       const bool* in_ptr6,
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
                                auto tmp4 = in_ptr4[static_cast<int64_t>(x0)];
                                auto tmp7 = in_ptr5[static_cast<int64_t>(x0)];
                                auto tmp2 = tmp0 * tmp1;
                                auto tmp5 = at::vec::Vectorized<float>(tmp4);
                                auto tmp6 = tmp3 - tmp5;
                                auto tmp8 = at::vec::Vectorized<float>(tmp7);
                                auto tmp9 = tmp6 * tmp8;
                                auto tmp10 = tmp2 * tmp9;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                                tmp_acc1_vec = tmp_acc1_vec + tmp10;
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
                            auto tmp1 = in_ptr5[static_cast<int64_t>(x0)];
                            auto tmp4 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp5 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp9 = out_ptr1[static_cast<int64_t>(x0)];
                            auto tmp12 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp13 = in_ptr4[static_cast<int64_t>(x0)];
                            auto tmp18 = out_ptr2[static_cast<int64_t>(x0)];
                            auto tmp25 = at::vec::VecMask<float,1>::from(in_ptr6 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp2 = static_cast<float>(32.0);
                            auto tmp3 = tmp1 / tmp2;
                            auto tmp6 = tmp4 * tmp5;
                            auto tmp7 = at::vec::Vectorized<float>(tmp2);
                            auto tmp8 = tmp6 * tmp7;
                            auto tmp10 = at::vec::Vectorized<float>(tmp9);
                            auto tmp11 = tmp8 - tmp10;
                            auto tmp14 = at::vec::Vectorized<float>(tmp13);
                            auto tmp15 = tmp12 - tmp14;
                            auto tmp16 = at::vec::Vectorized<float>(tmp1);
                            auto tmp17 = tmp15 * tmp16;
                            auto tmp19 = at::vec::Vectorized<float>(tmp18);
                            auto tmp20 = tmp17 * tmp19;
                            auto tmp21 = tmp11 - tmp20;
                            auto tmp22 = at::vec::Vectorized<float>(tmp3);
                            auto tmp23 = tmp22 * tmp21;
                            auto tmp24 = tmp0 + tmp23;
                            auto tmp26 = tmp25.to<float,1>();
                            auto tmp27 = static_cast<float>(1.1111111111111112);
                            auto tmp28 = at::vec::Vectorized<float>(tmp27);
                            auto tmp29 = tmp26 * tmp28;
                            auto tmp30 = tmp24 * tmp29;
                            tmp24.store(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
                            tmp30.store(out_ptr3 + static_cast<int64_t>(x1 + 32L*x0));
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
                                auto tmp2 = in_ptr4[static_cast<int64_t>(x1)];
                                auto tmp5 = in_ptr5[static_cast<int64_t>(x1)];
                                auto tmp3 = at::vec::Vectorized<float>(tmp2);
                                auto tmp4 = tmp1 - tmp3;
                                auto tmp6 = at::vec::Vectorized<float>(tmp5);
                                auto tmp7 = tmp4 * tmp6;
                                auto tmp8 = tmp0 * tmp7;
                                tmp_acc0_vec = tmp_acc0_vec + tmp8;
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


cpp_fused_clone_native_dropout_backward_native_layer_norm_sum_transpose_view_6 = async_compile.cpp_pybinding(['const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const float* in_ptr5,
                       const float* in_ptr6,
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
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(1L))
            {
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                        {
                            auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp1 = in_ptr3[static_cast<int64_t>(x0)];
                            auto tmp4 = in_ptr4[static_cast<int64_t>(x0)];
                            auto tmp7 = at::vec::Vectorized<float>::loadu(in_ptr5 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp9 = at::vec::Vectorized<float>::loadu(in_ptr6 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp2 = at::vec::Vectorized<float>(tmp1);
                            auto tmp3 = tmp0 - tmp2;
                            auto tmp5 = at::vec::Vectorized<float>(tmp4);
                            auto tmp6 = tmp3 * tmp5;
                            auto tmp8 = tmp6 * tmp7;
                            auto tmp10 = tmp8 + tmp9;
                            tmp10.store(out_ptr2 + static_cast<int64_t>(x1 + 32L*x0));
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


cpp_fused__unsafe_view_clone_split_transpose_view_7 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       float* out_ptr0)
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
                                    auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(64L + x3 + 16L*x1 + 96L*x2 + 1536L*x0), static_cast<int64_t>(16));
                                    tmp0.store(out_ptr0 + static_cast<int64_t>(x3 + 16L*x2 + 256L*x1 + 512L*x0));
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


cpp_fused__softmax_backward_data_masked_fill_mul_native_dropout_native_dropout_backward_nll_loss_backward_view_8 = async_compile.cpp_pybinding(['float*', 'const bool*', 'const float*', 'const bool*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const bool* in_ptr1,
                       const float* in_ptr2,
                       const bool* in_ptr3,
                       float* out_ptr0,
                       float* out_ptr1)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    auto in_ptr0 = in_out_ptr0;
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
                                auto tmp0 = at::vec::VecMask<float,1>::from(in_ptr1 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0), static_cast<int64_t>(16));
                                auto tmp2 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0), static_cast<int64_t>(16));
                                auto tmp7 = at::vec::VecMask<float,1>::from(in_ptr3 + static_cast<int64_t>(x2 + 16L*x1), static_cast<int64_t>(16));
                                auto tmp9 = out_ptr0[static_cast<int64_t>(x1 + 16L*x0)];
                                auto tmp10 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0), static_cast<int64_t>(16));
                                auto tmp1 = tmp0.to<float,1>();
                                auto tmp3 = tmp1 * tmp2;
                                auto tmp4 = static_cast<float>(1.1111111111111112);
                                auto tmp5 = at::vec::Vectorized<float>(tmp4);
                                auto tmp6 = tmp3 * tmp5;
                                auto tmp8 = tmp2.neg();
                                auto tmp11 = tmp1 * tmp5;
                                auto tmp12 = tmp10 * tmp11;
                                auto tmp13 = tmp12 * tmp2;
                                auto tmp14 = at::vec::Vectorized<float>(tmp9);
                                auto tmp15 = fmadd(tmp8, tmp14, tmp13);
                                auto tmp16 = static_cast<float>(0.0);
                                auto tmp17 = at::vec::Vectorized<float>(tmp16);
                                auto tmp18 = decltype(tmp17)::blendv(tmp15, tmp17, inductor_vec_mask_cast<float,1>(tmp7));
                                auto tmp19 = static_cast<float>(0.25);
                                auto tmp20 = at::vec::Vectorized<float>(tmp19);
                                auto tmp21 = tmp18 * tmp20;
                                tmp6.store(out_ptr1 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0));
                                tmp21.store(in_out_ptr0 + static_cast<int64_t>(x2 + 16L*x1 + 256L*x0));
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


cpp_fused__unsafe_view_clone_split_transpose_view_9 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       float* out_ptr0)
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
                                    auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x3 + 16L*x1 + 96L*x2 + 1536L*x0), static_cast<int64_t>(16));
                                    tmp0.store(out_ptr0 + static_cast<int64_t>(x3 + 16L*x2 + 256L*x1 + 512L*x0));
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


cpp_fused__unsafe_view_clone_split_transpose_view_10 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       float* out_ptr0)
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
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                {
                    for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(16L); x2+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L) && x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(16L)))
                            {
                                alignas(std::max(std::size_t(16), alignof(float))) float tmp0[16*16];
                                transpose_mxn<float,static_cast<int64_t>(16),static_cast<int64_t>(16),false>(in_ptr0 + static_cast<int64_t>(32L + x1 + 96L*x2 + 1536L*x0), static_cast<int64_t>(96L), tmp0, static_cast<int64_t>(16));
                                for (long x1_inner = 0; x1_inner < static_cast<int64_t>(16); x1_inner++)
                                {
                                    auto tmp1 = at::vec::Vectorized<float>::loadu(tmp0 + static_cast<int64_t>(16L*x1_inner), static_cast<int64_t>(16));
                                    tmp1.store(out_ptr0 + static_cast<int64_t>(x2 + 16L*x1 + 16L*x1_inner + 512L*x0));
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


cpp_fused__unsafe_view_cat_clone_transpose_view_11 = async_compile.cpp_pybinding(['const float*', 'const float*', 'const float*', 'float*', 'float*', 'float*'], r'''
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


cpp_fused_add_native_dropout_backward_native_layer_norm_native_layer_norm_backward_sum_view_12 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const bool*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const float* in_ptr5,
                       const bool* in_ptr6,
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
                                auto tmp4 = in_ptr4[static_cast<int64_t>(x0)];
                                auto tmp7 = in_ptr5[static_cast<int64_t>(x0)];
                                auto tmp2 = tmp0 * tmp1;
                                auto tmp5 = at::vec::Vectorized<float>(tmp4);
                                auto tmp6 = tmp3 - tmp5;
                                auto tmp8 = at::vec::Vectorized<float>(tmp7);
                                auto tmp9 = tmp6 * tmp8;
                                auto tmp10 = tmp2 * tmp9;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                                tmp_acc1_vec = tmp_acc1_vec + tmp10;
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
                            auto tmp1 = in_ptr5[static_cast<int64_t>(x0)];
                            auto tmp4 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp5 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp9 = out_ptr1[static_cast<int64_t>(x0)];
                            auto tmp12 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp13 = in_ptr4[static_cast<int64_t>(x0)];
                            auto tmp18 = out_ptr2[static_cast<int64_t>(x0)];
                            auto tmp25 = at::vec::VecMask<float,1>::from(in_ptr6 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp2 = static_cast<float>(32.0);
                            auto tmp3 = tmp1 / tmp2;
                            auto tmp6 = tmp4 * tmp5;
                            auto tmp7 = at::vec::Vectorized<float>(tmp2);
                            auto tmp8 = tmp6 * tmp7;
                            auto tmp10 = at::vec::Vectorized<float>(tmp9);
                            auto tmp11 = tmp8 - tmp10;
                            auto tmp14 = at::vec::Vectorized<float>(tmp13);
                            auto tmp15 = tmp12 - tmp14;
                            auto tmp16 = at::vec::Vectorized<float>(tmp1);
                            auto tmp17 = tmp15 * tmp16;
                            auto tmp19 = at::vec::Vectorized<float>(tmp18);
                            auto tmp20 = tmp17 * tmp19;
                            auto tmp21 = tmp11 - tmp20;
                            auto tmp22 = at::vec::Vectorized<float>(tmp3);
                            auto tmp23 = tmp22 * tmp21;
                            auto tmp24 = tmp0 + tmp23;
                            auto tmp26 = tmp25.to<float,1>();
                            auto tmp27 = static_cast<float>(1.1111111111111112);
                            auto tmp28 = at::vec::Vectorized<float>(tmp27);
                            auto tmp29 = tmp26 * tmp28;
                            auto tmp30 = tmp24 * tmp29;
                            tmp24.store(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
                            tmp30.store(out_ptr3 + static_cast<int64_t>(x1 + 32L*x0));
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
                                auto tmp2 = in_ptr4[static_cast<int64_t>(x1)];
                                auto tmp5 = in_ptr5[static_cast<int64_t>(x1)];
                                auto tmp3 = at::vec::Vectorized<float>(tmp2);
                                auto tmp4 = tmp1 - tmp3;
                                auto tmp6 = at::vec::Vectorized<float>(tmp5);
                                auto tmp7 = tmp4 * tmp6;
                                auto tmp8 = tmp0 * tmp7;
                                tmp_acc0_vec = tmp_acc0_vec + tmp8;
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


cpp_fused_add_clone_native_dropout_native_dropout_backward_native_layer_norm_sum_transpose_view_13 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const bool*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       const float* in_ptr1,
                       const bool* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const float* in_ptr5,
                       const float* in_ptr6,
                       const float* in_ptr7,
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
                                auto tmp0 = at::vec::VecMask<float,1>::from(in_ptr2 + static_cast<int64_t>(x2 + 32L*x1 + 512L*x0), static_cast<int64_t>(16));
                                auto tmp2 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x2 + 32L*x1 + 512L*x0), static_cast<int64_t>(16));
                                auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x2 + 32L*x1), static_cast<int64_t>(16));
                                auto tmp9 = in_ptr4[static_cast<int64_t>(x1 + 16L*x0)];
                                auto tmp12 = in_ptr5[static_cast<int64_t>(x1 + 16L*x0)];
                                auto tmp1 = tmp0.to<float,1>();
                                auto tmp4 = tmp2 + tmp3;
                                auto tmp5 = tmp1 * tmp4;
                                auto tmp6 = static_cast<float>(1.1111111111111112);
                                auto tmp7 = at::vec::Vectorized<float>(tmp6);
                                auto tmp8 = tmp5 * tmp7;
                                auto tmp10 = at::vec::Vectorized<float>(tmp9);
                                auto tmp11 = tmp8 - tmp10;
                                auto tmp13 = at::vec::Vectorized<float>(tmp12);
                                auto tmp14 = tmp11 * tmp13;
                                tmp14.store(in_out_ptr0 + static_cast<int64_t>(x2 + 32L*x1 + 512L*x0));
                            }
                        }
                    }
                }
            }
        }
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(1L))
            {
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                        {
                            auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr6 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp3 = at::vec::Vectorized<float>::loadu(in_ptr7 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp2 = tmp0 * tmp1;
                            auto tmp4 = tmp2 + tmp3;
                            tmp4.store(out_ptr2 + static_cast<int64_t>(x1 + 32L*x0));
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


cpp_fused_add_embedding_dense_backward_native_dropout_backward_native_layer_norm_backward_sum_view_14 = async_compile.cpp_pybinding(['float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const bool*', 'const int64_t*', 'const int64_t*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*'], r'''
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
                            auto tmp4 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp5 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp9 = out_ptr2[static_cast<int64_t>(x0)];
                            auto tmp12 = at::vec::Vectorized<float>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp13 = out_ptr3[static_cast<int64_t>(x0)];
                            auto tmp20 = at::vec::VecMask<float,1>::from(in_ptr5 + static_cast<int64_t>(x1 + 32L*x0), static_cast<int64_t>(16));
                            auto tmp26 = in_ptr6[static_cast<int64_t>(x0)];
                            auto tmp2 = static_cast<float>(32.0);
                            auto tmp3 = tmp1 / tmp2;
                            auto tmp6 = tmp4 * tmp5;
                            auto tmp7 = at::vec::Vectorized<float>(tmp2);
                            auto tmp8 = tmp6 * tmp7;
                            auto tmp10 = at::vec::Vectorized<float>(tmp9);
                            auto tmp11 = tmp8 - tmp10;
                            auto tmp14 = at::vec::Vectorized<float>(tmp13);
                            auto tmp15 = tmp12 * tmp14;
                            auto tmp16 = tmp11 - tmp15;
                            auto tmp17 = at::vec::Vectorized<float>(tmp3);
                            auto tmp18 = tmp17 * tmp16;
                            auto tmp19 = tmp0 + tmp18;
                            auto tmp21 = tmp20.to<float,1>();
                            auto tmp22 = static_cast<float>(1.1111111111111112);
                            auto tmp23 = at::vec::Vectorized<float>(tmp22);
                            auto tmp24 = tmp21 * tmp23;
                            auto tmp25 = tmp19 * tmp24;
                            auto tmp27 = static_cast<int64_t>(63);
                            auto tmp28 = min_propagate_nan(tmp27, tmp26);
                            auto tmp29 = static_cast<int64_t>(-64);
                            auto tmp30 = max_propagate_nan(tmp29, tmp28);
                            auto tmp31 = 64L;
                            auto tmp32 = c10::convert<int64_t>(tmp31);
                            auto tmp33 = int64_t(static_cast<std::make_unsigned_t<int64_t>>(tmp30) + static_cast<std::make_unsigned_t<int64_t>>(tmp32));
                            auto tmp34 = tmp30 < 0;
                            auto tmp35 = tmp34 ? tmp33 : tmp30;
                            auto tmp36 = static_cast<int64_t>(0);
                            auto tmp37 = tmp26 >= tmp36;
                            auto tmp38 = static_cast<int64_t>(64);
                            auto tmp39 = tmp26 < tmp38;
                            auto tmp40 = decltype(tmp37)(tmp37 & tmp39);
                            auto tmp41 = static_cast<int64_t>(-1);
                            auto tmp42 = tmp26 != tmp41;
                            auto tmp43 = decltype(tmp40)(tmp40 & tmp42);
                            auto tmp44 = static_cast<float>(0.0);
                            auto tmp45 = at::vec::VecMask<float,1>::from(tmp43);
                            auto tmp46 = at::vec::Vectorized<float>(tmp44);
                            auto tmp47 = decltype(tmp25)::blendv(tmp46, tmp25, inductor_vec_mask_cast<float,1>(tmp45));
                            auto tmp48 = x1 + 32L*tmp35;
                            auto tmp49 = c10::convert<int64_t>(tmp48);
                            auto tmp50 = at::vec::VectorizedN<int64_t,2>::arange(tmp49, 1);
                            tmp25.store(in_out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
                            atomic_add_vec<float, 2, 1>(out_ptr1, tmp50, tmp47);
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
        primals_1, primals_4, primals_5, primals_6, primals_7, primals_8, primals_10, primals_11, primals_12, primals_13, primals_14, primals_16, primals_17, primals_18, primals_19, primals_20, primals_22, primals_23, primals_24, primals_25, primals_26, primals_28, primals_30, iota, embedding, embedding_1, gt, getitem_1, rsqrt, bitwise_not, div, gt_1, clone_3, gt_2, add_3, getitem_6, rsqrt_1, gt_3, add_7, getitem_8, rsqrt_2, bitwise_not_1, div_1, gt_4, clone_7, gt_5, add_10, getitem_13, rsqrt_3, gt_6, mul_30, view_36, mm, amax_2, log, convert_element_type, div_4, tangents_1 = args
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
        del div_4
        del gt_6
        del mul_30
        del primals_28
        buf10 = empty_strided_cpu((32, 128), (128, 1), torch.float32)
        # Topologically Sorted Source Nodes: [convert_element_type_1, mul_41, mul_42, view_43, linear_3, permute_23, mm_3], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf9, (32, 32), (32, 1), 0), primals_26, out=buf10)
        del primals_26
        assert_size_stride_grouped((add_10, getitem_13, rsqrt_3, primals_22, primals_23), ((2, 16, 32), (2, 16, 1), (2, 16, 1), (32, ), (32, )), ((512, 32, 1), (16, 1, 1), (16, 1, 1), (1, ), (1, )), 'input')
        buf11 = reinterpret_tensor(buf3, (2, 16, 32), (512, 32, 1), 0); del buf3  # reuse
        assert_size_stride_grouped((primals_25, primals_24), ((128, ), (128, 32)), ((1, ), (32, 1)), 'input')
        cpp_fused_native_layer_norm_2(add_10, getitem_13, rsqrt_3, primals_22, primals_23, buf11)
        del primals_23
        buf12 = empty_strided_cpu((32, 128), (128, 1), torch.float32)
        # Topologically Sorted Source Nodes: [layer_norm_1, linear_2], Original ATen: [aten.native_layer_norm, aten.view, aten.t, aten.addmm]
        extern_kernels.addmm(primals_25, reinterpret_tensor(buf11, (32, 32), (32, 1), 0), reinterpret_tensor(primals_24, (32, 128), (1, 32), 0), alpha=1, beta=1, out=buf12)
        del primals_25
        buf13 = empty_strided_cpu((2, 16, 128), (2048, 128, 1), torch.float32)
        buf16 = reinterpret_tensor(buf10, (2, 16, 128), (2048, 128, 1), 0); del buf10  # reuse
        cpp_fused__unsafe_view_gelu_gelu_backward_view_3(buf16, buf12, buf13)
        buf14 = buf12; del buf12  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_1, mul_41, mul_42, view_43, permute_24, linear_2, gelu, linear_3, mm_4], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten._unsafe_view, aten.gelu, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf9, (32, 32), (1, 32), 0), reinterpret_tensor(buf13, (32, 128), (128, 1), 0), out=buf14)
        buf15 = reinterpret_tensor(buf5, (1, 32), (32, 1), 0); del buf5  # reuse
        cpp_fused_native_dropout_backward_sum_view_4(buf9, buf15)
        buf17 = reinterpret_tensor(buf9, (32, 32), (32, 1), 0); del buf9  # reuse
        # Topologically Sorted Source Nodes: [linear_2, gelu, view_45, mul_44, mul_45, mul_46, exp_4, mul_47, mul_48, add_18, mul_49, view_46, permute_27, mm_5], Original ATen: [aten.t, aten._unsafe_view, aten.gelu, aten.view, aten.gelu_backward, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf16, (32, 128), (128, 1), 0), primals_24, out=buf17)
        del primals_24
        buf18 = reinterpret_tensor(buf13, (128, 32), (32, 1), 0); del buf13  # reuse
        # Topologically Sorted Source Nodes: [layer_norm_1, linear_2, gelu, view_45, mul_44, mul_45, mul_46, exp_4, mul_47, mul_48, add_18, mul_49, view_46, permute_28, mm_6], Original ATen: [aten.native_layer_norm, aten.view, aten._unsafe_view, aten.gelu, aten.gelu_backward, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf16, (128, 32), (1, 128), 0), reinterpret_tensor(buf11, (32, 32), (32, 1), 0), out=buf18)
        buf19 = empty_strided_cpu((1, 128), (128, 1), torch.float32)
        assert_size_stride(gt_5, (2, 16, 32), (512, 32, 1), 'input')
        buf20 = buf4; del buf4  # reuse
        buf21 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf24 = buf6; del buf6  # reuse
        buf25 = buf11; del buf11  # reuse
        buf22 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf23 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_20, (32, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_add_gelu_gelu_backward_native_dropout_backward_native_layer_norm_native_layer_norm_backward_sum_view_5(buf24, buf16, buf17, primals_22, add_10, getitem_13, rsqrt_3, gt_5, buf19, buf20, buf21, buf25, buf22, buf23)
        del add_10
        del getitem_13
        del gt_5
        del primals_22
        del rsqrt_3
        buf26 = buf17; del buf17  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_2, mul_57, mul_58, view_49, linear_1, permute_31, mm_7], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf25, (32, 32), (32, 1), 0), primals_20, out=buf26)
        del primals_20
        assert_size_stride(clone_7, (2, 16, 2, 16), (512, 32, 16, 1), 'input')
        buf27 = empty_strided_cpu((32, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [convert_element_type_2, mul_57, mul_58, view_49, permute_32, y, linear_1, mm_8], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten._unsafe_view, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf25, (32, 32), (1, 32), 0), reinterpret_tensor(clone_7, (32, 32), (32, 1), 0), out=buf27)
        del clone_7
        buf28 = reinterpret_tensor(buf21, (1, 32), (32, 1), 0); del buf21  # reuse
        buf30 = empty_strided_cpu((2, 2, 16, 16), (512, 256, 16, 1), torch.float32)
        assert_size_stride_grouped((add_7, getitem_8, rsqrt_2, primals_16, primals_17), ((2, 16, 32), (2, 16, 1), (2, 16, 1), (32, ), (32, )), ((512, 32, 1), (16, 1, 1), (16, 1, 1), (1, ), (1, )), 'input')
        buf32 = empty_strided_cpu((2, 16, 32), (512, 32, 1), torch.float32)
        assert_size_stride_grouped((primals_19, primals_18), ((96, ), (96, 32)), ((1, ), (32, 1)), 'input')
        cpp_fused_clone_native_dropout_backward_native_layer_norm_sum_transpose_view_6(buf25, buf26, add_7, getitem_8, rsqrt_2, primals_16, primals_17, buf28, buf30, buf32)
        del primals_17
        buf33 = empty_strided_cpu((32, 96), (96, 1), torch.float32)
        # Topologically Sorted Source Nodes: [layer_norm, linear], Original ATen: [aten.native_layer_norm, aten.view, aten.t, aten.addmm]
        extern_kernels.addmm(primals_19, reinterpret_tensor(buf32, (32, 32), (32, 1), 0), reinterpret_tensor(primals_18, (32, 96), (1, 32), 0), alpha=1, beta=1, out=buf33)
        del primals_19
        buf34 = reinterpret_tensor(buf26, (2, 2, 16, 16), (512, 256, 16, 1), 0); del buf26  # reuse
        cpp_fused__unsafe_view_clone_split_transpose_view_7(buf33, buf34)
        buf35 = reinterpret_tensor(buf25, (4, 16, 16), (256, 16, 1), 0); del buf25  # reuse
        # Topologically Sorted Source Nodes: [view_51, view_52, permute_35, clone_10, view_53, linear, split, view_2, v_1, matmul_1, permute_37, bmm_5], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.split, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf30, (4, 16, 16), (256, 16, 1), 0), reinterpret_tensor(buf34, (4, 16, 16), (256, 1, 16), 0), out=buf35)
        assert_size_stride_grouped((gt_4, div_1), ((2, 2, 16, 16), (2, 2, 16, 16)), ((512, 256, 16, 1), (512, 256, 16, 1)), 'input')
        buf36 = empty_strided_cpu((2, 2, 16, 1), (32, 16, 1, 64), torch.float32)
        assert_size_stride(bitwise_not_1, (16, 16), (16, 1), 'input')
        buf29 = buf34; del buf34  # reuse
        buf37 = reinterpret_tensor(buf35, (2, 2, 16, 16), (512, 256, 16, 1), 0); del buf35  # reuse
        cpp_fused__softmax_backward_data_masked_fill_mul_native_dropout_native_dropout_backward_nll_loss_backward_view_8(buf37, gt_4, div_1, bitwise_not_1, buf36, buf29)
        del bitwise_not_1
        del buf36
        del div_1
        del gt_4
        buf31 = empty_strided_cpu((4, 16, 16), (256, 16, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_51, view_52, permute_35, clone_10, view_53, probs, matmul_1, permute_36, bmm_4], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.native_dropout, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf29, (4, 16, 16), (256, 1, 16), 0), reinterpret_tensor(buf30, (4, 16, 16), (256, 16, 1), 0), out=buf31)
        buf38 = buf30; del buf30  # reuse
        cpp_fused__unsafe_view_clone_split_transpose_view_9(buf33, buf38)
        buf39 = reinterpret_tensor(buf29, (4, 16, 16), (256, 16, 1), 0); del buf29  # reuse
        # Topologically Sorted Source Nodes: [full_default_8, linear, split, view_55, convert_element_type_3, mul_59, mul_60, mul_61, neg_1, fma, where_6, mul_62, view_56, view, q_1, matmul, permute_38, bmm_6], Original ATen: [aten.nll_loss_backward, aten._unsafe_view, aten.split, aten.view, aten.native_dropout_backward, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.transpose, aten.clone, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf38, (4, 16, 16), (256, 1, 16), 0), reinterpret_tensor(buf37, (4, 16, 16), (256, 16, 1), 0), out=buf39)
        buf40 = buf38; del buf38  # reuse
        cpp_fused__unsafe_view_clone_split_transpose_view_10(buf33, buf40)
        buf41 = empty_strided_cpu((4, 16, 16), (256, 16, 1), torch.float32)
        # Topologically Sorted Source Nodes: [full_default_8, linear, split, view_55, convert_element_type_3, mul_59, mul_60, mul_61, neg_1, fma, where_6, mul_62, view_56, view_1, k_1, transpose_3, matmul, permute_39, bmm_7], Original ATen: [aten.nll_loss_backward, aten._unsafe_view, aten.split, aten.view, aten.native_dropout_backward, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.transpose, aten.clone, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf37, (4, 16, 16), (256, 16, 1), 0), reinterpret_tensor(buf40, (4, 16, 16), (256, 1, 16), 0), out=buf41)
        del buf37
        del buf40
        buf45 = reinterpret_tensor(buf33, (2, 16, 96), (1536, 96, 1), 0); del buf33  # reuse
        buf42 = reinterpret_tensor(buf45, (2, 16, 32), (1536, 96, 1), 0)  # alias
        buf43 = reinterpret_tensor(buf45, (2, 16, 32), (1536, 96, 1), 32)  # alias
        buf44 = reinterpret_tensor(buf45, (2, 16, 32), (1536, 96, 1), 64)  # alias
        cpp_fused__unsafe_view_cat_clone_transpose_view_11(buf41, buf39, buf31, buf42, buf43, buf44)
        del buf31
        del buf39
        del buf42
        del buf43
        del buf44
        buf46 = reinterpret_tensor(buf41, (32, 32), (32, 1), 0); del buf41  # reuse
        # Topologically Sorted Source Nodes: [linear, view_62, permute_44, mm_9], Original ATen: [aten.t, aten.view, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf45, (32, 96), (96, 1), 0), primals_18, out=buf46)
        del primals_18
        buf47 = empty_strided_cpu((96, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [layer_norm, linear, view_62, permute_45, mm_10], Original ATen: [aten.native_layer_norm, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf45, (96, 32), (1, 96), 0), reinterpret_tensor(buf32, (32, 32), (32, 1), 0), out=buf47)
        buf48 = empty_strided_cpu((1, 96), (96, 1), torch.float32)
        assert_size_stride(gt_3, (2, 16, 32), (512, 32, 1), 'input')
        buf49 = buf20; del buf20  # reuse
        buf50 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf53 = buf24; del buf24  # reuse
        buf54 = buf32; del buf32  # reuse
        buf51 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf52 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_14, (32, 128), (128, 1), 'input')
        cpp_fused_add_native_dropout_backward_native_layer_norm_native_layer_norm_backward_sum_view_12(buf53, buf45, buf46, primals_16, add_7, getitem_8, rsqrt_2, gt_3, buf48, buf49, buf50, buf54, buf51, buf52)
        del add_7
        del buf45
        del buf49
        del buf50
        del getitem_8
        del gt_3
        del primals_16
        del rsqrt_2
        buf55 = reinterpret_tensor(buf16, (32, 128), (128, 1), 0); del buf16  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_4, mul_70, mul_71, view_65, linear_3, permute_48, mm_11], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf54, (32, 32), (32, 1), 0), primals_14, out=buf55)
        del primals_14
        assert_size_stride_grouped((add_3, getitem_6, rsqrt_1, primals_10, primals_11), ((2, 16, 32), (2, 16, 1), (2, 16, 1), (32, ), (32, )), ((512, 32, 1), (16, 1, 1), (16, 1, 1), (1, ), (1, )), 'input')
        buf56 = reinterpret_tensor(buf46, (2, 16, 32), (512, 32, 1), 0); del buf46  # reuse
        assert_size_stride_grouped((primals_13, primals_12), ((128, ), (128, 32)), ((1, ), (32, 1)), 'input')
        cpp_fused_native_layer_norm_2(add_3, getitem_6, rsqrt_1, primals_10, primals_11, buf56)
        del primals_11
        buf57 = empty_strided_cpu((32, 128), (128, 1), torch.float32)
        # Topologically Sorted Source Nodes: [layer_norm_1, linear_2], Original ATen: [aten.native_layer_norm, aten.view, aten.t, aten.addmm]
        extern_kernels.addmm(primals_13, reinterpret_tensor(buf56, (32, 32), (32, 1), 0), reinterpret_tensor(primals_12, (32, 128), (1, 32), 0), alpha=1, beta=1, out=buf57)
        del primals_13
        buf58 = empty_strided_cpu((2, 16, 128), (2048, 128, 1), torch.float32)
        buf61 = reinterpret_tensor(buf55, (2, 16, 128), (2048, 128, 1), 0); del buf55  # reuse
        cpp_fused__unsafe_view_gelu_gelu_backward_view_3(buf61, buf57, buf58)
        buf59 = buf57; del buf57  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_4, mul_70, mul_71, view_65, permute_49, linear_2, gelu, linear_3, mm_12], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten._unsafe_view, aten.gelu, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf54, (32, 32), (1, 32), 0), reinterpret_tensor(buf58, (32, 128), (128, 1), 0), out=buf59)
        buf60 = empty_strided_cpu((1, 32), (32, 1), torch.float32)
        cpp_fused_native_dropout_backward_sum_view_4(buf54, buf60)
        buf62 = reinterpret_tensor(buf54, (32, 32), (32, 1), 0); del buf54  # reuse
        # Topologically Sorted Source Nodes: [linear_2, gelu, view_67, mul_73, mul_74, mul_75, exp_5, mul_76, mul_77, add_22, mul_78, view_68, permute_52, mm_13], Original ATen: [aten.t, aten._unsafe_view, aten.gelu, aten.view, aten.gelu_backward, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf61, (32, 128), (128, 1), 0), primals_12, out=buf62)
        del primals_12
        buf63 = reinterpret_tensor(buf58, (128, 32), (32, 1), 0); del buf58  # reuse
        # Topologically Sorted Source Nodes: [layer_norm_1, linear_2, gelu, view_67, mul_73, mul_74, mul_75, exp_5, mul_76, mul_77, add_22, mul_78, view_68, permute_53, mm_14], Original ATen: [aten.native_layer_norm, aten.view, aten._unsafe_view, aten.gelu, aten.gelu_backward, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf61, (128, 32), (1, 128), 0), reinterpret_tensor(buf56, (32, 32), (32, 1), 0), out=buf63)
        buf64 = empty_strided_cpu((1, 128), (128, 1), torch.float32)
        assert_size_stride(gt_2, (2, 16, 32), (512, 32, 1), 'input')
        buf65 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf66 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf69 = buf53; del buf53  # reuse
        buf70 = buf56; del buf56  # reuse
        buf67 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf68 = empty_strided_cpu((32, ), (1, ), torch.float32)
        assert_size_stride(primals_8, (32, 32), (32, 1), 'input')
        cpp_fused__unsafe_view_add_gelu_gelu_backward_native_dropout_backward_native_layer_norm_native_layer_norm_backward_sum_view_5(buf69, buf61, buf62, primals_10, add_3, getitem_6, rsqrt_1, gt_2, buf64, buf65, buf66, buf70, buf67, buf68)
        del add_3
        del buf61
        del getitem_6
        del gt_2
        del primals_10
        del rsqrt_1
        buf71 = buf62; del buf62  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_5, mul_86, mul_87, view_71, linear_1, permute_56, mm_15], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf70, (32, 32), (32, 1), 0), primals_8, out=buf71)
        del primals_8
        assert_size_stride(clone_3, (2, 16, 2, 16), (512, 32, 16, 1), 'input')
        buf72 = empty_strided_cpu((32, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [convert_element_type_5, mul_86, mul_87, view_71, permute_57, y, linear_1, mm_16], Original ATen: [aten.native_dropout_backward, aten.view, aten.t, aten._unsafe_view, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf70, (32, 32), (1, 32), 0), reinterpret_tensor(clone_3, (32, 32), (32, 1), 0), out=buf72)
        del clone_3
        buf73 = reinterpret_tensor(buf66, (1, 32), (32, 1), 0); del buf66  # reuse
        buf75 = empty_strided_cpu((2, 2, 16, 16), (512, 256, 16, 1), torch.float32)
        assert_size_stride_grouped((gt, embedding, embedding_1, getitem_1, rsqrt), ((2, 16, 32), (2, 16, 32), (16, 32), (2, 16, 1), (2, 16, 1)), ((512, 32, 1), (512, 32, 1), (32, 1), (16, 1, 1), (16, 1, 1)), 'input')
        buf77 = embedding; del embedding  # reuse
        assert_size_stride_grouped((primals_4, primals_5), ((32, ), (32, )), ((1, ), (1, )), 'input')
        buf78 = empty_strided_cpu((2, 16, 32), (512, 32, 1), torch.float32)
        assert_size_stride_grouped((primals_7, primals_6), ((96, ), (96, 32)), ((1, ), (32, 1)), 'input')
        cpp_fused_add_clone_native_dropout_native_dropout_backward_native_layer_norm_sum_transpose_view_13(buf77, buf70, buf71, gt, embedding_1, getitem_1, rsqrt, primals_4, primals_5, buf73, buf75, buf78)
        del embedding_1
        del getitem_1
        del primals_5
        buf79 = empty_strided_cpu((32, 96), (96, 1), torch.float32)
        # Topologically Sorted Source Nodes: [layer_norm, linear], Original ATen: [aten.native_layer_norm, aten.view, aten.t, aten.addmm]
        extern_kernels.addmm(primals_7, reinterpret_tensor(buf78, (32, 32), (32, 1), 0), reinterpret_tensor(primals_6, (32, 96), (1, 32), 0), alpha=1, beta=1, out=buf79)
        del primals_7
        buf80 = reinterpret_tensor(buf71, (2, 2, 16, 16), (512, 256, 16, 1), 0); del buf71  # reuse
        cpp_fused__unsafe_view_clone_split_transpose_view_7(buf79, buf80)
        buf81 = reinterpret_tensor(buf70, (4, 16, 16), (256, 16, 1), 0); del buf70  # reuse
        # Topologically Sorted Source Nodes: [view_73, view_74, permute_60, clone_16, view_75, linear, split, view_2, v_1, matmul_1, permute_62, bmm_9], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.split, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf75, (4, 16, 16), (256, 16, 1), 0), reinterpret_tensor(buf80, (4, 16, 16), (256, 1, 16), 0), out=buf81)
        assert_size_stride_grouped((gt_1, div), ((2, 2, 16, 16), (2, 2, 16, 16)), ((512, 256, 16, 1), (512, 256, 16, 1)), 'input')
        buf82 = empty_strided_cpu((2, 2, 16, 1), (32, 16, 1, 64), torch.float32)
        assert_size_stride(bitwise_not, (16, 16), (16, 1), 'input')
        buf74 = buf80; del buf80  # reuse
        buf83 = reinterpret_tensor(buf81, (2, 2, 16, 16), (512, 256, 16, 1), 0); del buf81  # reuse
        cpp_fused__softmax_backward_data_masked_fill_mul_native_dropout_native_dropout_backward_nll_loss_backward_view_8(buf83, gt_1, div, bitwise_not, buf82, buf74)
        del bitwise_not
        del buf82
        del div
        del gt_1
        buf76 = empty_strided_cpu((4, 16, 16), (256, 16, 1), torch.float32)
        # Topologically Sorted Source Nodes: [view_73, view_74, permute_60, clone_16, view_75, probs, matmul_1, permute_61, bmm_8], Original ATen: [aten.view, aten.transpose, aten.clone, aten._unsafe_view, aten.native_dropout, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf74, (4, 16, 16), (256, 1, 16), 0), reinterpret_tensor(buf75, (4, 16, 16), (256, 16, 1), 0), out=buf76)
        buf84 = buf75; del buf75  # reuse
        cpp_fused__unsafe_view_clone_split_transpose_view_9(buf79, buf84)
        buf85 = reinterpret_tensor(buf74, (4, 16, 16), (256, 16, 1), 0); del buf74  # reuse
        # Topologically Sorted Source Nodes: [full_default_8, linear, split, view_77, convert_element_type_6, mul_88, mul_89, mul_90, neg_2, fma_1, where_7, mul_91, view_78, view, q_1, matmul, permute_63, bmm_10], Original ATen: [aten.nll_loss_backward, aten._unsafe_view, aten.split, aten.view, aten.native_dropout_backward, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.transpose, aten.clone, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf84, (4, 16, 16), (256, 1, 16), 0), reinterpret_tensor(buf83, (4, 16, 16), (256, 16, 1), 0), out=buf85)
        buf86 = buf84; del buf84  # reuse
        cpp_fused__unsafe_view_clone_split_transpose_view_10(buf79, buf86)
        buf87 = empty_strided_cpu((4, 16, 16), (256, 16, 1), torch.float32)
        # Topologically Sorted Source Nodes: [full_default_8, linear, split, view_77, convert_element_type_6, mul_88, mul_89, mul_90, neg_2, fma_1, where_7, mul_91, view_78, view_1, k_1, transpose_3, matmul, permute_64, bmm_11], Original ATen: [aten.nll_loss_backward, aten._unsafe_view, aten.split, aten.view, aten.native_dropout_backward, aten._softmax_backward_data, aten.masked_fill, aten.mul, aten.transpose, aten.clone, aten.bmm]
        extern_kernels.bmm(reinterpret_tensor(buf83, (4, 16, 16), (256, 16, 1), 0), reinterpret_tensor(buf86, (4, 16, 16), (256, 1, 16), 0), out=buf87)
        del buf83
        del buf86
        buf91 = reinterpret_tensor(buf79, (2, 16, 96), (1536, 96, 1), 0); del buf79  # reuse
        buf88 = reinterpret_tensor(buf91, (2, 16, 32), (1536, 96, 1), 0)  # alias
        buf89 = reinterpret_tensor(buf91, (2, 16, 32), (1536, 96, 1), 32)  # alias
        buf90 = reinterpret_tensor(buf91, (2, 16, 32), (1536, 96, 1), 64)  # alias
        cpp_fused__unsafe_view_cat_clone_transpose_view_11(buf87, buf85, buf76, buf88, buf89, buf90)
        del buf76
        del buf85
        del buf88
        del buf89
        del buf90
        buf92 = reinterpret_tensor(buf87, (32, 32), (32, 1), 0); del buf87  # reuse
        # Topologically Sorted Source Nodes: [linear, view_84, permute_69, mm_17], Original ATen: [aten.t, aten.view, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf91, (32, 96), (96, 1), 0), primals_6, out=buf92)
        del primals_6
        buf93 = empty_strided_cpu((96, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [layer_norm, linear, view_84, permute_70, mm_18], Original ATen: [aten.native_layer_norm, aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf91, (96, 32), (1, 96), 0), reinterpret_tensor(buf78, (32, 32), (32, 1), 0), out=buf93)
        del buf78
        buf94 = empty_strided_cpu((1, 96), (96, 1), torch.float32)
        buf102 = empty_strided_cpu((64, 32), (32, 1), torch.float32)
        buf95 = buf65; del buf65  # reuse
        buf96 = empty_strided_cpu((2, 16, 1), (16, 1, 32), torch.float32)
        buf99 = buf69; del buf69  # reuse
        buf97 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf98 = empty_strided_cpu((32, ), (1, ), torch.float32)
        buf100 = empty_strided_cpu((16, 32), (32, 1), torch.float32)
        assert_size_stride(iota, (16, ), (1, ), 'input')
        cpp_fused_add_embedding_dense_backward_native_dropout_backward_native_layer_norm_backward_sum_view_14(buf99, buf91, buf92, primals_4, buf77, rsqrt, gt, primals_1, iota, buf94, buf102, buf95, buf96, buf97, buf98, buf100)
        del buf77
        del buf91
        del buf92
        del buf95
        del buf96
        del buf99
        del gt
        del iota
        del primals_1
        del primals_4
        del rsqrt
        return (None, buf102, buf100, buf97, buf98, buf93, reinterpret_tensor(buf94, (96, ), (1, ), 0), buf72, reinterpret_tensor(buf73, (32, ), (1, ), 0), buf67, buf68, buf63, reinterpret_tensor(buf64, (128, ), (1, ), 0), buf59, reinterpret_tensor(buf60, (32, ), (1, ), 0), buf51, buf52, buf47, reinterpret_tensor(buf48, (96, ), (1, ), 0), buf27, reinterpret_tensor(buf28, (32, ), (1, ), 0), buf22, buf23, buf18, reinterpret_tensor(buf19, (128, ), (1, ), 0), buf14, reinterpret_tensor(buf15, (32, ), (1, ), 0), buf7, buf8, buf2, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    primals_1 = rand_strided((2, 16), (16, 1), device='cpu', dtype=torch.int64)
    primals_4 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_5 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_6 = rand_strided((96, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_7 = rand_strided((96, ), (1, ), device='cpu', dtype=torch.float32)
    primals_8 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_10 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_11 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_12 = rand_strided((128, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_13 = rand_strided((128, ), (1, ), device='cpu', dtype=torch.float32)
    primals_14 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    primals_16 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_17 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_18 = rand_strided((96, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_19 = rand_strided((96, ), (1, ), device='cpu', dtype=torch.float32)
    primals_20 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_22 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_23 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_24 = rand_strided((128, 32), (32, 1), device='cpu', dtype=torch.float32)
    primals_25 = rand_strided((128, ), (1, ), device='cpu', dtype=torch.float32)
    primals_26 = rand_strided((32, 128), (128, 1), device='cpu', dtype=torch.float32)
    primals_28 = rand_strided((32, ), (1, ), device='cpu', dtype=torch.float32)
    primals_30 = rand_strided((64, 32), (32, 1), device='cpu', dtype=torch.float32)
    iota = rand_strided((16, ), (1, ), device='cpu', dtype=torch.int64)
    embedding = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    embedding_1 = rand_strided((16, 32), (32, 1), device='cpu', dtype=torch.float32)
    gt = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.bool)
    getitem_1 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    rsqrt = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    bitwise_not = rand_strided((16, 16), (16, 1), device='cpu', dtype=torch.bool)
    div = rand_strided((2, 2, 16, 16), (512, 256, 16, 1), device='cpu', dtype=torch.float32)
    gt_1 = rand_strided((2, 2, 16, 16), (512, 256, 16, 1), device='cpu', dtype=torch.bool)
    clone_3 = rand_strided((2, 16, 2, 16), (512, 32, 16, 1), device='cpu', dtype=torch.float32)
    gt_2 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.bool)
    add_3 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    getitem_6 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    rsqrt_1 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    gt_3 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.bool)
    add_7 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    getitem_8 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    rsqrt_2 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    bitwise_not_1 = rand_strided((16, 16), (16, 1), device='cpu', dtype=torch.bool)
    div_1 = rand_strided((2, 2, 16, 16), (512, 256, 16, 1), device='cpu', dtype=torch.float32)
    gt_4 = rand_strided((2, 2, 16, 16), (512, 256, 16, 1), device='cpu', dtype=torch.bool)
    clone_7 = rand_strided((2, 16, 2, 16), (512, 32, 16, 1), device='cpu', dtype=torch.float32)
    gt_5 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.bool)
    add_10 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    getitem_13 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    rsqrt_3 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    gt_6 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.bool)
    mul_30 = rand_strided((2, 16, 32), (512, 32, 1), device='cpu', dtype=torch.float32)
    view_36 = rand_strided((32, 32), (32, 1), device='cpu', dtype=torch.float32)
    mm = rand_strided((32, 64), (64, 1), device='cpu', dtype=torch.float32)
    amax_2 = rand_strided((32, 1), (1, 1), device='cpu', dtype=torch.float32)
    log = rand_strided((32, 1), (1, 1), device='cpu', dtype=torch.float32)
    convert_element_type = rand_strided((), (), device='cpu', dtype=torch.float32)
    div_4 = rand_strided((2, 16, 1), (16, 1, 1), device='cpu', dtype=torch.float32)
    tangents_1 = rand_strided((), (), device='cpu', dtype=torch.float32)
    return [primals_1, primals_4, primals_5, primals_6, primals_7, primals_8, primals_10, primals_11, primals_12, primals_13, primals_14, primals_16, primals_17, primals_18, primals_19, primals_20, primals_22, primals_23, primals_24, primals_25, primals_26, primals_28, primals_30, iota, embedding, embedding_1, gt, getitem_1, rsqrt, bitwise_not, div, gt_1, clone_3, gt_2, add_3, getitem_6, rsqrt_1, gt_3, add_7, getitem_8, rsqrt_2, bitwise_not_1, div_1, gt_4, clone_7, gt_5, add_10, getitem_13, rsqrt_3, gt_6, mul_30, view_36, mm, amax_2, log, convert_element_type, div_4, tangents_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cpu')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
