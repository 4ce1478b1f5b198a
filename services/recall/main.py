"""python -m services.recall.main"""

from services.core.grpc.server import main
from services.recall.bootstrap import GROUPS, build_app

if __name__ == "__main__":
    main("recall", build_app, GROUPS, freeze_after_start=True)
