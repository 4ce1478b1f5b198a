"""python -m services.consolidate.main"""

from services.consolidate.bootstrap import GROUPS, build_app
from services.core.grpc.server import main

if __name__ == "__main__":
    main("consolidate", build_app, GROUPS, nice=lambda settings: settings.consolidation.consolidation_nice)
