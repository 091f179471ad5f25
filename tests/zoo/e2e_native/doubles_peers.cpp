// Native half of tests/zoo/e2e_native_doubles_peers.py: arm() runs in the block's process with the whole interpreter
// in reach. It finds every resolved kernel set of upstream's and 0.5.23's arms (kda.e2e.kernels.KernelSet objects,
// through gc) and wraps each site's function, in place in the set's own dict, so that every call launches the site
// twice: the peers' timed block calls do twice their kernels' work. Nothing of upstream's modules changes.
#include <Python.h>

#define KDA_STR2(x) #x
#define KDA_STR(x) KDA_STR2(x)
#define KDA_CAT2(a, b) a##b
#define KDA_CAT(a, b) KDA_CAT2(a, b)

static const char* PAYLOAD = R"PY(
import gc
from kda.e2e.kernels import KernelSet

def _twice(fn):
    def twice(*args, **kwargs):
        fn(*args, **kwargs)
        return fn(*args, **kwargs)
    twice.kda_zoo_twice = True
    return twice

for _obj in gc.get_objects():
    if type(_obj) is KernelSet and _obj.arm in ("upstream", "latest"):
        _fns = _obj.__dict__["_fns"]
        for _site, _fn in list(_fns.items()):
            if not getattr(_fn, "kda_zoo_twice", False):
                _fns[_site] = _twice(_fn)
)PY";

static PyObject* arm(PyObject*, PyObject*) {
    PyObject* globals = PyDict_New();
    if (globals == nullptr) return nullptr;
    PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
    PyObject* done = PyRun_String(PAYLOAD, Py_file_input, globals, globals);
    Py_DECREF(globals);
    if (done == nullptr) return nullptr;
    Py_DECREF(done);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {{"arm", arm, METH_NOARGS, "wrap the peers' sites"}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, KDA_STR(TORCH_EXTENSION_NAME), nullptr, -1, methods};

PyMODINIT_FUNC KDA_CAT(PyInit_, TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&module); }
