/**
 * The named schemas: each has an `$id`, is registered once at the root (src/plugins/openapi.ts) and is
 * referenced by `Type.Ref`, so the OpenAPI document lists it under components/schemas and generated clients
 * get a type of that name. The validators see the same schemas with the references put back in place
 * (src/plugins/validation.ts, inlineRefs).
 */
import type { TSchema } from '@sinclair/typebox'
import { FolderList, FolderRecord } from './folder.js'
import { LinkList } from './link-list.js'
import { BulkCreateResult } from './link-bulk.js'
import { Geolocation, LinkExpirationInput, LinkInput, LinkPatch, LinkRecord, PasswordProtectInput, PixelInput, RotatorEntry } from './link.js'
import { Pixel, PixelList } from './pixel.js'
import { FieldError, Problem } from './problem.js'
import { ScriptList, ScriptRecord, ScriptSummary } from './script.js'
import { LinkStats, VisitList, WorkspaceStats } from './stats.js'

export const COMPONENT_SCHEMAS: (TSchema & { $id: string })[] = [
  FieldError,
  Problem,
  // What create and update accept.
  LinkInput,
  LinkPatch,
  PixelInput,
  Geolocation,
  RotatorEntry,
  LinkExpirationInput,
  PasswordProtectInput,
  // What the API answers.
  LinkRecord,
  BulkCreateResult,
  LinkList,
  FolderRecord,
  FolderList,
  Pixel,
  PixelList,
  ScriptSummary,
  ScriptRecord,
  ScriptList,
  LinkStats,
  WorkspaceStats,
  VisitList,
] as (TSchema & { $id: string })[]
