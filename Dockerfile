# Build: install everything, generate the Prisma client, compile TypeScript, then drop dev dependencies.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY prisma ./prisma
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY schemas ./schemas
COPY src ./src
RUN npm run build && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

# Runtime: the compiled service, its production dependencies and the migrations, run as a non-root user.
# On start the server applies pending migrations (under PostgreSQL's advisory lock, so several instances
# starting together take turns), then listens.
FROM node:20-bookworm-slim AS runtime
# Memory: two malloc arenas keep native allocations from spreading over an arena per thread, and blocks of 64 KiB
# and more (request bodies, the driver's buffers) are mapped on their own, so their memory goes back to the system
# once freed (glibc otherwise keeps it: 10-15 MB less at the peaks of npm run bench). 8 MB young-generation
# semi-spaces: with 4 MB, the garbage of fifty requests in flight outlived the young generation and was promoted,
# and the old generation's collections cost an API request 15-30% more CPU; 16 MB held 15-20 MB more at rest and
# at the peak than 8, for about a seventh less CPU on a list of 20 links (README, "Benchmarks" and "Deploying").
# `npm start` runs the server the same way.
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=65536
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/prisma ./prisma
RUN mkdir -p /app/data && chown node:node /app/data
USER node
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "--enable-source-maps", "--max-semi-space-size=8", "--heap-growing-percent=30", "dist/src/server.js"]
