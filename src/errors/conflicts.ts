/**
 * The errors of folders and pixels, beside the link errors of app-error.ts: each a named constructor of the
 * one AppError type, rendered as problem+json by the error handler like every other.
 */
import { AppError } from './app-error.js'

export const nameTaken = (what: string, name: string) =>
  new AppError(409, 'name_taken', `The workspace already has a ${what} named "${name}"`)

export const folderNotEmpty = (folderId: number, linkCount: number) =>
  new AppError(
    409,
    'folder_not_empty',
    `Folder ${folderId} holds ${linkCount} link${linkCount === 1 ? '' : 's'}. Pass ?moveLinksTo=<folderId> to move ` +
      'them to another folder of the workspace first, or ?force=true to delete the folder and keep the links in no folder.',
  )

export const pixelExists = (platform: string, value: string, existingId: string) =>
  new AppError(409, 'pixel_exists', `The workspace already has the ${platform} pixel ${value} (id ${existingId})`)
