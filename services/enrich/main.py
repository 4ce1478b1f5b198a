"""python -m services.enrich.main"""

from services.core.grpc.server import main
from services.enrich.bootstrap import build_app

if __name__ == "__main__":
    main("enrich", build_app)
