-- The workspace's top links (dimension 'link' of WorkspaceHourly and WorkspaceDaily) now count each link's own
-- unique visitors, as the link's own stats do, where they counted the workspace's first visits of the day (a
-- visitor seen on another link first counted 0 here). The rows written before are corrected from the links' own
-- totals, which hold the same visits. Values are compared as text: a cast of "value" could meet another
-- dimension's row before the filter on "dimension".
UPDATE "analytics"."WorkspaceHourly" w
SET "visitors" = l."visitors"
FROM "analytics"."LinkHourly" l
WHERE w."dimension" = 'link' AND l."dimension" = 'total' AND l."value" = ''
  AND l."linkUniq"::text = w."value" AND l."hour" = w."hour" AND w."visitors" <> l."visitors";

UPDATE "analytics"."WorkspaceDaily" w
SET "visitors" = l."visitors"
FROM "analytics"."LinkDaily" l
WHERE w."dimension" = 'link' AND l."dimension" = 'total' AND l."value" = ''
  AND l."linkUniq"::text = w."value" AND l."day" = w."day" AND w."visitors" <> l."visitors";
