"""The subset of the ggml C API the bridge calls, declared for cffi's ABI mode (dlopen, no compiler).

Copied by hand from the pinned headers (ggml.h, ggml-backend.h, ggml-alloc.h). Structs are kept
opaque except the two whose fields we pass or read: ``ggml_init_params`` (passed by value) and
``ggml_type_traits`` (its ``to_float``). Field checks live in ``tests/test_bridge_constants.py``.
"""

from __future__ import annotations

CDEF = """
typedef struct ggml_context ggml_context;
typedef struct ggml_tensor ggml_tensor;
typedef struct ggml_cgraph ggml_cgraph;
typedef struct ggml_backend * ggml_backend_t;
typedef struct ggml_backend_buffer * ggml_backend_buffer_t;
typedef struct ggml_backend_device * ggml_backend_dev_t;
typedef struct ggml_backend_reg * ggml_backend_reg_t;

struct ggml_init_params {
    size_t mem_size;
    void * mem_buffer;
    bool   no_alloc;
};

typedef void (*ggml_to_float_t)(const void * x, float * y, int64_t k);
typedef void (*ggml_from_float_t)(const float * x, void * y, int64_t k);

struct ggml_type_traits {
    const char *      type_name;
    int64_t           blck_size;
    int64_t           blck_size_interleave;
    size_t            type_size;
    bool              is_quantized;
    ggml_to_float_t   to_float;
    ggml_from_float_t from_float_ref;
};

typedef void (*ggml_backend_set_n_threads_t)(ggml_backend_t backend, int n_threads);

/* ggml.h */
ggml_context * ggml_init(struct ggml_init_params params);
void           ggml_free(ggml_context * ctx);
size_t         ggml_tensor_overhead(void);
size_t         ggml_graph_overhead_custom(size_t size, bool grads);
ggml_tensor *  ggml_new_tensor_1d(ggml_context * ctx, int type, int64_t ne0);
ggml_tensor *  ggml_new_tensor_2d(ggml_context * ctx, int type, int64_t ne0, int64_t ne1);
ggml_tensor *  ggml_new_tensor_3d(ggml_context * ctx, int type, int64_t ne0, int64_t ne1, int64_t ne2);
ggml_tensor *  ggml_mul_mat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b);
ggml_tensor *  ggml_mul_mat_id(ggml_context * ctx, ggml_tensor * as, ggml_tensor * b, ggml_tensor * ids);
ggml_tensor *  ggml_cpy(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b);
ggml_cgraph *  ggml_new_graph_custom(ggml_context * ctx, size_t size, bool grads);
void           ggml_build_forward_expand(ggml_cgraph * cgraph, ggml_tensor * tensor);
int            ggml_graph_n_nodes(ggml_cgraph * cgraph);
size_t         ggml_nbytes(const ggml_tensor * tensor);
int64_t        ggml_nelements(const ggml_tensor * tensor);
int64_t        ggml_blck_size(int type);
size_t         ggml_type_size(int type);
size_t         ggml_row_size(int type, int64_t ne);
const char *   ggml_type_name(int type);
bool           ggml_is_quantized(int type);
bool           ggml_quantize_requires_imatrix(int type);
size_t         ggml_quantize_chunk(int type, const float * src, void * dst, int64_t start, int64_t nrows,
                                   int64_t n_per_row, const float * imatrix);
const struct ggml_type_traits * ggml_get_type_traits(int type);

/* ggml-alloc.h */
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t backend);

/* ggml-backend.h */
void          ggml_backend_buffer_free(ggml_backend_buffer_t buffer);
size_t        ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer);
const char *  ggml_backend_name(ggml_backend_t backend);
void          ggml_backend_free(ggml_backend_t backend);
void          ggml_backend_tensor_set(ggml_tensor * tensor, const void * data, size_t offset, size_t size);
void          ggml_backend_tensor_get(const ggml_tensor * tensor, void * data, size_t offset, size_t size);
void          ggml_backend_tensor_memset(ggml_tensor * tensor, uint8_t value, size_t offset, size_t size);
void          ggml_backend_synchronize(ggml_backend_t backend);
int           ggml_backend_graph_compute(ggml_backend_t backend, ggml_cgraph * cgraph);
bool          ggml_backend_supports_op(ggml_backend_t backend, const ggml_tensor * op);
ggml_backend_dev_t ggml_backend_get_device(ggml_backend_t backend);
const char *  ggml_backend_dev_name(ggml_backend_dev_t device);
const char *  ggml_backend_dev_description(ggml_backend_dev_t device);
void          ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total);
int           ggml_backend_dev_type(ggml_backend_dev_t device);
ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device);
ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t device, const char * params);
void *        ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name);
size_t        ggml_backend_dev_count(void);
ggml_backend_dev_t ggml_backend_dev_get(size_t index);
ggml_backend_dev_t ggml_backend_dev_by_name(const char * name);
void          ggml_backend_load_all_from_path(const char * dir_path);
"""
