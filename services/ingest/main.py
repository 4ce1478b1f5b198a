"""python -m services.ingest.main"""

from services.core.grpc.server import main
from services.ingest.bootstrap import GROUPS, build_app

if __name__ == "__main__":
    main("ingest", build_app, GROUPS)
