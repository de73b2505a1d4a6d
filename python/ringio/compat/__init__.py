"""Drop-in replacements for other Python kernel-AIO libraries, built on ringio's core.

* :mod:`ringio.compat.linux_aio` stands in for ``linux_aio`` 0.4.1;
* :mod:`ringio.compat.linux_aio_bind` for the parts of ``linux_aio_bind`` 1.0.0 that
  programs using ``linux_aio`` import (its enums and priority helpers).

Alias the import names before the program imports them::

    import sys
    from ringio.compat import linux_aio, linux_aio_bind
    sys.modules["linux_aio"] = linux_aio
    sys.modules["linux_aio_bind"] = linux_aio_bind
"""
