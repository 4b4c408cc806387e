"""What nnrt refuses of ONNX's node test cases, and why: the expected-refusals table that
the conformance test (tests/client/onnx/test_backend.py) holds the importer to, in one place.

Each entry names an operator (as the case's node has it; "<Op>, expanded" for the cases
onnx expands into the operator's function body) and, optionally, a regular expression over
the case names it covers (None: every case of that operator), with the reason. A case the
table lists must be refused; a case it does not list must pass. Whole operators refused
here are the README's "Refused" list (a test checks the two agree).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["EMPTY_IN_NODE_TESTS", "EXPECTED_REFUSALS", "Refusal", "case_operators", "expected_refusal",
           "refused_operators"]

_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


@dataclass(frozen=True)
class Refusal:
    operator: str
    cases: str | None  # a regular expression over case names; None: all of the operator's
    reason: str

    def matches(self, name: str, operator: str) -> bool:
        return operator == self.operator and (self.cases is None or
                                              re.fullmatch(self.cases, name) is not None)


def case_operators(cases: list[Any]) -> dict[str, str]:
    """The operator each node test case is about: its node's op_type; for a case onnx
    expanded into the function body, the operator of the case it expands, ", expanded"."""
    single = {c.name: c.model.graph.node[0].op_type for c in cases
              if len(c.model.graph.node) == 1}
    found = {}
    for c in cases:
        base = _EXPANDED.sub("", c.name)
        if c.name in single and base == c.name:
            found[c.name] = single[c.name]
        elif base != c.name and base in single:
            found[c.name] = f"{single[base]}, expanded"
        else:  # several nodes, no single-node sibling: its last node
            last = c.model.graph.node[-1].op_type if c.model.graph.node else "?"
            found[c.name] = f"{last}, expanded" if base != c.name else last
    return found


def expected_refusal(name: str, operator: str) -> Refusal | None:
    return next((r for r in EXPECTED_REFUSALS if r.matches(name, operator)), None)


def refused_operators() -> set[str]:
    """Operators refused in every node test case and mapped in none (those mapped only with
    constant parameters, CONSTANT_PARAMETERS, are mapped)."""
    return {r.operator for r in EXPECTED_REFUSALS if r.cases is None and
            not r.operator.endswith(", expanded")} - set(CONSTANT_PARAMETERS) - \
        set(EMPTY_IN_NODE_TESTS)


_TRAINING = "a training operator (loss, optimiser): inference only, refused by design"
_RANDOM = "a random operator: refused by design (no deterministic OH_NN form)"
_STRINGS = "strings have no OH_NN data type"
_SEQUENCES = "sequences, optionals and maps have no OH_NN form (tensors only)"
_CONTROL = "control flow (subgraphs) has no OH_NN operation"
_DOMAIN = "an operator of another domain (ai.onnx.ml, ai.onnx.preview.training): only the " \
    "default domain is imported"
_NO_FORM = "no OH_NN operation computes it, nor an exact composition of them"
_BFLOAT16 = "bfloat16 has no OH_NN data type"
_NOT_YET = "not mapped yet: the OH_NN operations could compose it exactly (issue 27's list)"

EXPECTED_REFUSALS: list[Refusal] = [
    Refusal('Acos', None, _NO_FORM),
    Refusal('Acosh', None, _NO_FORM),
    Refusal('Adagrad', None, _TRAINING),
    Refusal('Adam', None, _TRAINING),
    Refusal('AffineGrid', None, _NO_FORM),
    Refusal('AffineGrid, expanded', None,
            'expanded into control flow has no OH_NN operation'),
    Refusal('ArgMax', 'test_(argmax_default_axis_example_select_last_index|argmax_default_axis_random_select_last_index|argmax_keepdims_example_select_last_index|argmax_keepdims_random_select_last_index|argmax_negative_axis_keepdims_example_select_last_index|argmax_negative_axis_keepdims_random_select_last_index|argmax_no_keepdims_example_select_last_index|argmax_no_keepdims_random_select_last_index)',
            'select_last_index=1 (OH_NN ArgMax takes the first index)'),
    Refusal('ArgMin', 'test_(argmin_default_axis_example_select_last_index|argmin_default_axis_random_select_last_index|argmin_keepdims_example_select_last_index|argmin_keepdims_random_select_last_index|argmin_negative_axis_keepdims_example_select_last_index|argmin_negative_axis_keepdims_random_select_last_index|argmin_no_keepdims_example_select_last_index|argmin_no_keepdims_random_select_last_index)',
            'select_last_index=1 (OH_NN ArgMax takes the first index)'),
    Refusal('ArrayFeatureExtractor', None, _DOMAIN),
    Refusal('Asin', None, _NO_FORM),
    Refusal('Asinh', None, _NO_FORM),
    Refusal('Atan', None, _NO_FORM),
    Refusal('Atanh', None, _NO_FORM),
    Refusal('Attention', 'test_(attention_4d_causal_bf16|attention_4d_padded_kv_bf16|attention_4d_causal_padded_kv_bf16|attention_4d_attn_mask_causal_bf16|attention_3d_causal_bf16)',
            _BFLOAT16),
    Refusal('Attention, expanded', 'test_(attention_4d_causal_bf16_expanded|attention_4d_padded_kv_bf16_expanded|attention_4d_causal_padded_kv_bf16_expanded|attention_4d_attn_mask_causal_bf16_expanded|attention_3d_causal_bf16_expanded)',
            _BFLOAT16),
    Refusal('AveragePool', 'test_(averagepool_1d_default)',
            'only 2-D pooling is imported (input rank 3)'),
    Refusal('AveragePool', 'test_(averagepool_3d_default|averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False|averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True|averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False|averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True|averagepool_3d_dilations_small)',
            'only 2-D pooling is imported (input rank 5)'),
    Refusal('AveragePool', 'test_(averagepool_2d_ceil_last_window_starts_on_pad)',
            'count_include_pad with ceil_mode: windows past the padding have no exact OH_NN form'),
    Refusal('AveragePool', 'test_(averagepool_2d_dilations)',
            'dilations [2, 2]: pooling has no dilation in OH_NN'),
    Refusal('BatchNormalization', 'test_(batchnorm_epsilon_training_mode|batchnorm_example_training_mode)',
            'training_mode=1 (batch statistics, running mean / variance outputs) is training, not inference: refused'),
    Refusal('Bernoulli', None, _RANDOM),
    Refusal('Bernoulli, expanded', None,
            'expanded into operator RandomUniformLike is not supported by the nnrt importer (see SUPPORTED_OPERATORS)'),
    Refusal('Binarizer', None, _DOMAIN),
    Refusal('BitCast', None, _NO_FORM),
    Refusal('BitShift', None, _NO_FORM),
    Refusal('BitwiseAnd', None, _NO_FORM),
    Refusal('BitwiseNot', None, _NO_FORM),
    Refusal('BitwiseOr', None, _NO_FORM),
    Refusal('BitwiseXor', None, _NO_FORM),
    Refusal('BlackmanWindow', None, _NO_FORM),
    Refusal('BlackmanWindow, expanded', None,
            'expanded into operator Range is not supported by the nnrt importer (see SUPPORTED_OPERATORS)'),
    Refusal('Cast', 'test_(cast_FLOAT_to_BFLOAT16)',
            'target type bfloat16 has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_BFLOAT16_to_FLOAT)',
            "input 'input': element type bfloat16 has no OH_NN data type"),
    Refusal('Cast', 'test_(cast_FLOAT16_to_FLOAT8E4M3FN|cast_FLOAT_to_FLOAT8E4M3FN|cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN|cast_no_saturate_FLOAT_to_FLOAT8E4M3FN)',
            'target type float8_e4m3fn has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_FLOAT16_to_FLOAT8E4M3FNUZ|cast_FLOAT_to_FLOAT8E4M3FNUZ|cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ|cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ)',
            'target type float8_e4m3fnuz has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_FLOAT8E4M3FN_to_FLOAT|cast_FLOAT8E4M3FN_to_FLOAT16)',
            "input 'input': element type float8_e4m3fn has no OH_NN data type"),
    Refusal('Cast', 'test_(cast_FLOAT8E4M3FNUZ_to_FLOAT|cast_FLOAT8E4M3FNUZ_to_FLOAT16)',
            "input 'input': element type float8_e4m3fnuz has no OH_NN data type"),
    Refusal('Cast', 'test_(cast_FLOAT16_to_FLOAT8E5M2|cast_FLOAT_to_FLOAT8E5M2|cast_no_saturate_FLOAT16_to_FLOAT8E5M2|cast_no_saturate_FLOAT_to_FLOAT8E5M2)',
            'target type float8_e5m2 has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_FLOAT16_to_FLOAT8E5M2FNUZ|cast_FLOAT_to_FLOAT8E5M2FNUZ|cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ|cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ)',
            'target type float8_e5m2fnuz has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_FLOAT8E5M2_to_FLOAT|cast_FLOAT8E5M2_to_FLOAT16)',
            "input 'input': element type float8_e5m2 has no OH_NN data type"),
    Refusal('Cast', 'test_(cast_FLOAT8E5M2FNUZ_to_FLOAT|cast_FLOAT8E5M2FNUZ_to_FLOAT16)',
            "input 'input': element type float8_e5m2fnuz has no OH_NN data type"),
    Refusal('Cast', 'test_(cast_FLOAT16_to_UINT4|cast_FLOAT_to_UINT4)',
            'target type uint4 has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_FLOAT16_to_INT4|cast_FLOAT_to_INT4)',
            'target type int4 has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_UINT4_to_FLOAT|cast_UINT4_to_FLOAT16|cast_UINT4_to_UINT8)',
            "input 'input': element type uint4 has no OH_NN data type"),
    Refusal('Cast', 'test_(cast_INT4_to_FLOAT|cast_INT4_to_FLOAT16|cast_INT4_to_INT8)',
            "input 'input': element type int4 has no OH_NN data type"),
    Refusal('Cast', 'test_(cast_FLOAT4E2M1_to_FLOAT|cast_FLOAT4E2M1_to_FLOAT16)',
            "input 'input': element type float4_e2m1fn has no OH_NN data type"),
    Refusal('Cast', 'test_(cast_FLOAT16_to_FLOAT4E2M1|cast_FLOAT_to_FLOAT4E2M1)',
            'target type float4_e2m1fn has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_FLOAT16_to_UINT2|cast_FLOAT_to_UINT2)',
            'target type uint2 has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_FLOAT16_to_INT2|cast_FLOAT_to_INT2)',
            'target type int2 has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_UINT2_to_FLOAT|cast_UINT2_to_FLOAT16|cast_UINT2_to_UINT8)',
            "input 'input': element type uint2 has no OH_NN data type"),
    Refusal('Cast', 'test_(cast_INT2_to_FLOAT|cast_INT2_to_FLOAT16|cast_INT2_to_INT8)',
            "input 'input': element type int2 has no OH_NN data type"),
    Refusal('Cast', 'test_(cast_e8m0_FLOAT16_to_FLOAT8E8M0|cast_e8m0_FLOAT_to_FLOAT8E8M0)',
            'target type float8_e8m0fnu has no OH_NN data type'),
    Refusal('Cast', 'test_(cast_e8m0_FLOAT8E8M0_to_FLOAT|cast_e8m0_FLOAT8E8M0_to_FLOAT16)',
            "input 'input': element type float8_e8m0fnu has no OH_NN data type"),
    Refusal('CastLike', None, "input 'like' of shape [0]: an empty tensor has no OH_NN form "
            "(and float8 / int4 / int2 / bfloat16 types have no OH_NN data type)"),
    Refusal('CastLike, expanded', None,
            "expanded into input 'like' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form; input 'like': element type bfloat16 has no OH_NN data type"),
    Refusal('CausalConvWithState', None, _NO_FORM),
    Refusal('CausalConvWithState, expanded', None,
            'expanded into only 2-D convolutions are imported (input rank 3, not 4)'),
    Refusal('Celu', 'test_(celu_bfloat16)',
            "input 'X': element type bfloat16 has no OH_NN data type"),
    Refusal('Celu, expanded', 'test_(celu_bfloat16_expanded)',
            _BFLOAT16),
    Refusal('CenterCropPad', None, _NOT_YET),
    Refusal('CenterCropPad, expanded', None,
            'expanded into pads (input 1) must be a constant (or computable from constants and static shapes)'),
    Refusal('Col2Im', None, _NO_FORM),
    Refusal('Compress', None, _NO_FORM),
    Refusal('Constant', None, "the model has no inputs (an OH_NN model computes from at least one input; this one's outputs are constants)"),
    Refusal('ConstantOfShape', None, 'the shape (input 0) must be a constant: evaluated at import'),
    Refusal('ConvInteger', None, _NOT_YET),
    Refusal('ConvTranspose', None, _NOT_YET),
    Refusal('Cosh', None, _NO_FORM),
    Refusal('CumProd', None, _NOT_YET),
    Refusal('DFT', None, _NO_FORM),
    Refusal('DeformConv', None, _NO_FORM),
    Refusal('DequantizeLinear', None, 'scale and zero point must be constants (OH_NN quantisation parameters are fixed)'),
    Refusal('Det', None, _NO_FORM),
    Refusal('Dropout', 'test_(dropout_default_mask|dropout_default_mask_ratio)',
            "output 'z' is produced by no node"),
    Refusal('Dropout', 'test_(training_dropout|training_dropout_default|training_dropout_default_mask|training_dropout_mask|training_dropout_zero_ratio|training_dropout_zero_ratio_mask)',
            'training mode (a non-constant or true training_mode) is not inference'),
    Refusal('DynamicQuantizeLinear', None, 'dynamic quantisation (parameters computed at run time) has no OH_NN form'),
    Refusal('DynamicQuantizeLinear, expanded', None,
            'expanded into scale and zero point must be constants (OH_NN quantisation parameters are fixed)'),
    Refusal('Einsum', None, _NOT_YET),
    Refusal('Equal', 'test_(equal_string|equal_string_broadcast)',
            "input 'x': element type object has no OH_NN data type"),
    Refusal('Expand', None, 'shape (input 1) must be a constant (or computable from constants and static shapes)'),
    Refusal('EyeLike', None, _NOT_YET),
    Refusal('GRU', None, 'GRU has no OH_NN operation'),
    Refusal('GatherElements', None, _NOT_YET),
    Refusal('GatherND', None, _NOT_YET),
    Refusal('GridSample', None, _NO_FORM),
    Refusal('HammingWindow', None, _NO_FORM),
    Refusal('HammingWindow, expanded', None,
            'expanded into operator Range is not supported by the nnrt importer (see SUPPORTED_OPERATORS)'),
    Refusal('HannWindow', None, _NO_FORM),
    Refusal('HannWindow, expanded', None,
            'expanded into operator Range is not supported by the nnrt importer (see SUPPORTED_OPERATORS)'),
    Refusal('Identity', 'test_(identity_sequence)',
            "graph input/output 'x' is a sequence value (only tensors have an OH_NN form)"),
    Refusal('Identity', 'test_(identity_opt)',
            "graph input/output 'opt_in' is a optional value (only tensors have an OH_NN form)"),
    Refusal('If', None, _CONTROL),
    Refusal('ImageDecoder', None, _NO_FORM),
    Refusal('InstanceNormalization', None, _NOT_YET),
    Refusal('LRN', None, _NOT_YET),
    Refusal('LSTM', None, 'W must be a constant (its gates are reordered at import)'),
    Refusal('LabelEncoder', None, _STRINGS),
    Refusal('LinearAttention', None, _NO_FORM),
    Refusal('LinearAttention, expanded', None,
            'expanded into control flow has no OH_NN operation'),
    Refusal('Loop', None, _CONTROL),
    Refusal('LpPool', None, _NOT_YET),
    Refusal('MatMulInteger', None, _NOT_YET),
    Refusal('MaxPool', 'test_(maxpool_with_argmax_2d_precomputed_pads|maxpool_with_argmax_2d_precomputed_strides)',
            'the Indices output is not computed'),
    Refusal('MaxPool', 'test_(maxpool_1d_default)',
            'only 2-D pooling is imported (input rank 3)'),
    Refusal('MaxPool', 'test_(maxpool_3d_default|maxpool_3d_dilations|maxpool_3d_dilations_use_ref_impl|maxpool_3d_dilations_use_ref_impl_large)',
            'only 2-D pooling is imported (input rank 5)'),
    Refusal('MaxPool', 'test_(maxpool_2d_dilations)',
            'dilations [2, 2]: pooling has no dilation in OH_NN'),
    Refusal('MaxUnpool', None, _NO_FORM),
    Refusal('MelWeightMatrix', None, _NO_FORM),
    Refusal('Mod', 'test_(mod_float16_mixed_sign_fmod_0|mod_float32_mixed_sign_fmod_0|mod_float64_mixed_sign_fmod_0|mod_float_edge_cases_fmod_0_float16|mod_float_edge_cases_fmod_0_float32|mod_float_edge_cases_fmod_0_float64)',
            'fmod=0 on floats is invalid ONNX'),
    Refusal('Momentum', None, _TRAINING),
    Refusal('NegativeLogLikelihoodLoss', None, _TRAINING),
    Refusal('NegativeLogLikelihoodLoss, expanded', None,
            'expanded into operator GatherElements is not supported by the nnrt importer (see SUPPORTED_OPERATORS)'),
    Refusal('NonMaxSuppression', None, _NO_FORM),
    Refusal('NonZero', None, _NO_FORM),
    Refusal('OneHot', None, _NOT_YET),
    Refusal('OptionalGetElement', None, _SEQUENCES),
    Refusal('OptionalHasElement', None, _SEQUENCES),
    Refusal('Pad', None, 'pads (input 1) must be a constant (or computable from constants and static shapes)'),
    Refusal('Pow', 'test_(pow_types_int64_float32)',
            "an integer base (int64) with a float32 exponent (the OH_NN Pow computes in the base's type)"),
    Refusal('Pow', 'test_(pow_types_int32_float32)',
            "an integer base (int32) with a float32 exponent (the OH_NN Pow computes in the base's type)"),
    Refusal('QLinearConv', None, 'QLinear operators are not imported (export QDQ: QuantizeLinear / DequantizeLinear around float operators)'),
    Refusal('QLinearMatMul', None, 'QLinear operators are not imported (export QDQ: QuantizeLinear / DequantizeLinear around float operators)'),
    Refusal('QuantizeLinear', None, 'scale and zero point must be constants (OH_NN quantisation parameters are fixed)'),
    Refusal('RMSNormalization, expanded', None,
            "expanded into the shape of 'RMSNormalization_test_rms_normalization_4d_axis0_expanded_function_XSquaredMean' is unknown (shape inferen; the shape of 'RMSNormalization_test_rms_normalization_4d_axis_negative_4_expanded_function_XSquaredMean' is unknown (sha"),
    Refusal('RNN', None, 'RNN has no OH_NN operation'),
    Refusal('Range', None, 'start, limit and delta must be constants: evaluated at import'),
    Refusal('Range, expanded', None,
            "expanded into control flow has no OH_NN operation; input 'start': element type bfloat16 has no OH_NN data type"),
    Refusal('ReduceL1', 'test_(reduce_l1_default_axes_keepdims_example|reduce_l1_default_axes_keepdims_random)',
            "input 'axes' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceL1', 'test_(reduce_l1_empty_set)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceL1, expanded', 'test_(reduce_l1_default_axes_keepdims_example_expanded|reduce_l1_default_axes_keepdims_random_expanded)',
            "input 'axes' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceL1, expanded', 'test_(reduce_l1_empty_set_expanded)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceL2', 'test_(reduce_l2_default_axes_keepdims_example|reduce_l2_default_axes_keepdims_random)',
            "input 'axes' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceL2', 'test_(reduce_l2_empty_set)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceL2, expanded', None,
            "expanded into the shape of 'ReduceL2_test_reduce_l2_do_not_keepdims_example_expanded_function_sqrt' is unknown (shape inference could ; the shape of 'ReduceL2_test_reduce_l2_do_not_keepdims_random_expanded_function_sqrt' is unknown (shape inference could n"),
    Refusal('ReduceLogSum', 'test_(reduce_log_sum_default)',
            "input 'axes' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceLogSum', 'test_(reduce_log_sum_empty_set)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceLogSum, expanded', 'test_(reduce_log_sum_default_expanded)',
            "input 'axes' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceLogSum, expanded', 'test_(reduce_log_sum_empty_set_expanded)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceLogSumExp', 'test_(reduce_log_sum_exp_default_axes_keepdims_example|reduce_log_sum_exp_default_axes_keepdims_random)',
            "input 'axes' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceLogSumExp', 'test_(reduce_log_sum_exp_empty_set)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceLogSumExp, expanded', None,
            "expanded into the shape of 'ReduceLogSumExp_test_reduce_log_sum_exp_do_not_keepdims_example_expanded_function_reduced_double' is unkno; the shape of 'ReduceLogSumExp_test_reduce_log_sum_exp_do_not_keepdims_random_expanded_function_reduced_double' is unknow"),
    Refusal('ReduceMax', 'test_(reduce_max_empty_set|reduce_max_empty_set_bool)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceMean', 'test_(reduce_mean_default_axes_keepdims_example|reduce_mean_default_axes_keepdims_random)',
            "input 'axes' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceMin', 'test_(reduce_min_empty_set)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceProd', 'test_(reduce_prod_empty_set)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceSum', 'test_(reduce_sum_default_axes_keepdims_example|reduce_sum_default_axes_keepdims_random|reduce_sum_empty_axes_input_noop|reduce_sum_empty_axes_input_noop_example)',
            "input 'axes' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceSum', 'test_(reduce_sum_empty_set|reduce_sum_empty_set_non_reduced_axis_zero)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceSumSquare', 'test_(reduce_sum_square_default_axes_keepdims_example|reduce_sum_square_default_axes_keepdims_random)',
            "input 'axes' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceSumSquare', 'test_(reduce_sum_square_empty_set)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceSumSquare, expanded', 'test_(reduce_sum_square_default_axes_keepdims_example_expanded|reduce_sum_square_default_axes_keepdims_random_expanded)',
            "input 'axes' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('ReduceSumSquare, expanded', 'test_(reduce_sum_square_empty_set_expanded)',
            "input 'data' of shape [2, 0, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('RegexFullMatch', None, _STRINGS),
    Refusal('Reshape', 'test_(reshape_allowzero_reordered)',
            "input 'data' of shape [0, 3, 4]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('Resize', 'test_(resize_downsample_scales_cubic|resize_downsample_scales_cubic_A_n0p5_exclude_outside|resize_downsample_scales_cubic_align_corners|resize_downsample_scales_linear|resize_downsample_scales_linear_align_corners|resize_downsample_scales_linear_half_pixel_symmetric|resize_downsample_scales_nearest|resize_upsample_scales_cubic|resize_upsample_scales_cubic_A_n0p5_exclude_outside|resize_upsample_scales_cubic_align_corners|resize_upsample_scales_cubic_asymmetric|resize_upsample_scales_linear|resize_upsample_scales_linear_align_corners|resize_upsample_scales_linear_half_pixel_symmetric|resize_upsample_scales_nearest|resize_upsample_scales_nearest_axes_2_3)',
            'scales (input 2) must be a constant (or computable from constants and static shapes)'),
    Refusal('Resize', 'test_(resize_upsample_sizes_nearest|resize_upsample_sizes_nearest_axes_2_3)',
            'nearest mode is imported for whole upsampling factors with asymmetric/floor or half_pixel/round_prefer_*, not half_pixel/round_prefer_floor from [2, 2] to [7, 8'),
    Refusal('Resize', 'test_(resize_downsample_sizes_nearest)',
            'nearest mode is imported for whole upsampling factors with asymmetric/floor or half_pixel/round_prefer_*, not half_pixel/round_prefer_floor from [2, 4] to [1, 3'),
    Refusal('Resize', 'test_(resize_downsample_sizes_cubic|resize_upsample_sizes_cubic)',
            "mode 'cubic': OH_NN's Resize is bilinear, or nearest upsampling by whole factors"),
    Refusal('Resize', 'test_(resize_tf_crop_and_resize|resize_tf_crop_and_resize_axes_2_3|resize_tf_crop_and_resize_extrapolation_value)',
            "coordinate_transformation_mode 'tf_crop_and_resize' with linear mode"),
    Refusal('Resize', 'test_(resize_upsample_sizes_nearest_floor_align_corners)',
            'nearest mode is imported for whole upsampling factors with asymmetric/floor or half_pixel/round_prefer_*, not align_corners/floor from [4, 4] to [8, 8]'),
    Refusal('Resize', 'test_(resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric)',
            'nearest mode is imported for whole upsampling factors with asymmetric/floor or half_pixel/round_prefer_*, not asymmetric/round_prefer_ceil from [4, 4] to [8, 8]'),
    Refusal('Resize', 'test_(resize_upsample_sizes_nearest_ceil_half_pixel)',
            'nearest mode is imported for whole upsampling factors with asymmetric/floor or half_pixel/round_prefer_*, not half_pixel/ceil from [4, 4] to [8, 8]'),
    Refusal('Resize', 'test_(resize_downsample_scales_cubic_antialias|resize_downsample_scales_linear_antialias|resize_downsample_sizes_cubic_antialias|resize_downsample_sizes_linear_antialias)',
            'antialias when downsampling is not computed'),
    Refusal('Resize', 'test_(resize_tf_crop_and_resize_axes_3_2|resize_upsample_scales_nearest_axes_3_2|resize_upsample_sizes_nearest_axes_3_2)',
            'axes [3, 2] (only the spatial ones)'),
    Refusal('Resize', 'test_(resize_downsample_sizes_nearest_not_larger|resize_upsample_sizes_nearest_not_larger)',
            "keep_aspect_ratio_policy 'not_larger'"),
    Refusal('Resize', 'test_(resize_downsample_sizes_nearest_not_smaller|resize_upsample_sizes_nearest_not_smaller)',
            "keep_aspect_ratio_policy 'not_smaller'"),
    Refusal('ReverseSequence', None, _NO_FORM),
    Refusal('RoiAlign', None, _NO_FORM),
    Refusal('RotaryEmbedding', None, _NOT_YET),
    Refusal('RotaryEmbedding, expanded', None,
            "expanded into the shape of 'RotaryEmbedding_test_rotary_embedding_expanded_function_XToRotate' is unknown (shape inference could not w; the shape of 'RotaryEmbedding_test_rotary_embedding_3d_input_expanded_function_XToRotate' is unknown (shape inference co"),
    Refusal('STFT', None, _NO_FORM),
    Refusal('Scan', None, _CONTROL),
    Refusal('Scatter', None, _NOT_YET),
    Refusal('ScatterElements', None, _NOT_YET),
    Refusal('ScatterND', None, _NOT_YET),
    Refusal('SequenceInsert', None, _SEQUENCES),
    Refusal('SequenceMap', None, _SEQUENCES),
    Refusal('SequenceMap, expanded', None,
            "expanded into graph input/output 'x' is a sequence value (only tensors have an OH_NN form); graph input/output 'x0' is a sequence value (only tensors have an OH_NN form)"),
    Refusal('Shape', 'test_(shape_start_greater_than_end)',
            "output 'y' is an empty constant (a dimension of size 0 has no OH_NN form)"),
    Refusal('Sinh', None, _NO_FORM),
    Refusal('Slice', None, 'starts (input 1) must be a constant (or computable from constants and static shapes)'),
    Refusal('SoftmaxCrossEntropyLoss', None, _TRAINING),
    Refusal('SoftmaxCrossEntropyLoss, expanded', None,
            "expanded into the shape of 'SoftmaxCrossEntropyLoss_test_sce_none_expanded_function_X_Log' is unknown (shape inference could not work ; the shape of 'SoftmaxCrossEntropyLoss_test_sce_none_log_prob_expanded_function_X_Log' is unknown (shape inference could "),
    Refusal('Split', 'test_(split_variable_parts_1d_opset13|split_variable_parts_1d_opset18|split_variable_parts_2d_opset13|split_variable_parts_2d_opset18|split_variable_parts_default_axis_opset13|split_variable_parts_default_axis_opset18)',
            'split (input 1) must be a constant (or computable from constants and static shapes)'),
    Refusal('Split', 'test_(split_zero_size_splits_opset13|split_zero_size_splits_opset18)',
            "input 'input' of shape [0]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('SplitToSequence', None, _SEQUENCES),
    Refusal('Squeeze', None, 'axes (input 1) must be a constant (or computable from constants and static shapes)'),
    Refusal('StringConcat', None, _STRINGS),
    Refusal('StringNormalizer', None, _STRINGS),
    Refusal('StringSplit', None, _STRINGS),
    Refusal('SwiGLU', None, _NOT_YET),
    Refusal('Tan', None, _NOT_YET),
    Refusal('TensorScatter', None, _NO_FORM),
    Refusal('TfIdfVectorizer', None, _STRINGS),
    Refusal('TopK', None, _NOT_YET),
    Refusal('TreeEnsemble', None, _DOMAIN),
    Refusal('Trilu', 'test_(triu_zero)',
            "input 'x' of shape [0, 5]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('Trilu', 'test_(tril_zero)',
            "input 'x' of shape [3, 0, 5]: an empty tensor (a dimension of size 0) has no OH_NN form"),
    Refusal('Unique', None, _NO_FORM),
    Refusal('Unsqueeze', 'test_(unsqueeze_two_axes|unsqueeze_three_axes|unsqueeze_unsorted_axes)',
            'several axes fed at run time (OH_NN ExpandDims reads one axis at run time; several must be constants)'),
    Refusal('Upsample', None, 'scales (input 2) must be a constant (or computable from constants and static shapes)'),
]

# Operators mapped only when a parameter is a constant (an initializer, or computable from
# constants and static shapes, as exported models have it): onnx's node tests feed these
# parameters as graph inputs, so every one of their cases is refused above.
CONSTANT_PARAMETERS: dict[str, str] = {
    "Constant": "a model of constants only has no OH_NN form (no inputs)",
    "ConstantOfShape": "the shape",
    "DequantizeLinear": "scale and zero point (OH_NN quantisation parameters are constants)",
    "QuantizeLinear": "scale and zero point (OH_NN quantisation parameters are constants)",
    "Expand": "the shape",
    "LSTM": "W, R and B (their gates are reordered at import)",
    "Pad": "pads and constant_value",
    "Range": "start, limit and delta",
    "Slice": "starts, ends, axes and steps",
    "Squeeze": "axes",
}

# Operators mapped whose every node test feeds what no OH_NN tensor holds: CastLike's tests
# give the `like` input (read for its type only) as an empty [0] tensor; CastLike itself runs
# in the function bodies of onnx's expanded tests (Elu, Selu, Gelu, Attention, ...).
EMPTY_IN_NODE_TESTS: dict[str, str] = {
    "CastLike": "the `like` input is an empty tensor in every node test",
}
