"""python -m services.enrich.main"""

import os

# Before numpy loads: its OpenBLAS would start a thread per core that busy-waits
# after every small matrix product (in-batch neighbours), taking CPU from the
# models; enrichment runs its models side by side already.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from services.core.grpc.server import main  # noqa: E402
from services.enrich.bootstrap import GROUPS, build_app  # noqa: E402

if __name__ == "__main__":
    main("enrich", build_app, GROUPS)
